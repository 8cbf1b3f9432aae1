/*
 * cap_cxx: allocations from C++ functions whose names only read well demangled, for
 * check_symbols.py: a static member function in a namespace, a function template, a lambda,
 * and a function whose std::string result gives it an ABI tag. Built with -O0 so that each
 * is a frame of its own. Each allocates once with a size of its own (the checker finds the
 * allocation by it); the line of each call that allocates is marked "bt:NAME".
 */
#include <cstdio>
#include <cstdlib>
#include <string>

namespace geo {
struct Grid {
	static int *cells(int n);
};

int *Grid::cells(int n)
{
	return new int[n]; /* bt:cells, 4004 bytes */
}

template <typename T> T *make(std::size_t n)
{
	return static_cast<T *>(std::malloc(n * sizeof(T))); /* bt:make, 5000 bytes */
}

std::string build(int n)
{
	return std::string(static_cast<std::size_t>(n), 'x'); /* bt:build, 6001 bytes */
}
} // namespace geo

int main()
{
	auto grow = [](int n) {
		return static_cast<char *>(std::malloc(static_cast<std::size_t>(n))); /* bt:lambda */
	};
	int *c = geo::Grid::cells(1001);      /* bt:main_cells */
	double *d = geo::make<double>(625);   /* bt:main_make */
	char *g = grow(7007);                 /* bt:main_lambda */
	std::string s = geo::build(6000);     /* bt:main_build */

	c[0] = 1;
	d[0] = 2;
	g[0] = 3;
	std::printf("%d %.0f %d %zu\n", c[0], d[0], g[0], s.size());
	delete[] c;
	std::free(d);
	std::free(g);
	return 0;
}
