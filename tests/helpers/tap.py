"""TAP output for the Python test scripts: numbered ok / not ok lines, diagnostics as
comments, the plan at the end, so meson counts every case."""


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, cond, desc, diag=None):
        self.n += 1
        print(("ok %d - %s" if cond else "not ok %d - %s") % (self.n, desc), flush=True)
        if not cond:
            self.failed += 1
            for line in str(diag or "").splitlines()[:30]:
                print("# " + line, flush=True)
        return cond

    def skip(self, desc, why):
        self.n += 1
        print("ok %d - %s # SKIP %s" % (self.n, desc, why), flush=True)

    def diag(self, text):
        for line in text.splitlines():
            print("# " + line, flush=True)

    def done(self):
        print("1..%d" % self.n, flush=True)
        return 1 if self.failed else 0
