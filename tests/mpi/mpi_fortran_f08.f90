! mpi_fortran.f90 written for the Fortran 2008 module mpi_f08: the same calls with the same
! arguments and the same output line, so check_mpi.py expects the same of both but for the
! array section, which reaches MPI as one element of a temporary datatype. MPICH's
! mpi_f08 entry points call PMPI_ functions, not MPI_ ones: they are traced because
! libtfsmpi.so routes such calls to its wrappers (capture/mpi/mpi_f08.c).
program mpi_fortran_f08
   use mpi_f08
   implicit none
   integer :: rank, nranks, nxt, prv, cnt, i
   type(MPI_Status) :: status
   type(MPI_Request) :: reqs(2)
   integer :: sbuf(3), rbuf(4), ibuf, ival
   integer :: mat(4, 4), row(4), sec(8)
   type(MPI_Datatype) :: vec
   type(MPI_Comm) :: half
   type(MPI_Info) :: info
   integer :: hrank, hsize
   integer :: bc(3), check
   character(len=16) :: phase

   call MPI_Init()
   call MPI_Comm_rank(MPI_COMM_WORLD, rank)
   call MPI_Comm_size(MPI_COMM_WORLD, nranks)
   nxt = mod(rank + 1, nranks)
   prv = mod(rank - 1 + nranks, nranks)
   check = 0

   ! blocking ring: 3 of 4 posted integers, rank 0 sends first so the ring cannot deadlock
   sbuf = [rank, 10 * rank, 100 * rank]
   rbuf = -1
   if (rank == 0) then
      call MPI_Send(sbuf, 3, MPI_INTEGER, nxt, 11, MPI_COMM_WORLD)
      call MPI_Recv(rbuf, 4, MPI_INTEGER, prv, 11, MPI_COMM_WORLD, status)
   else
      call MPI_Recv(rbuf, 4, MPI_INTEGER, prv, 11, MPI_COMM_WORLD, status)
      call MPI_Send(sbuf, 3, MPI_INTEGER, nxt, 11, MPI_COMM_WORLD)
   end if
   call MPI_Get_count(status, MPI_INTEGER, cnt)
   if (cnt /= 3 .or. status%MPI_SOURCE /= prv .or. status%MPI_TAG /= 11 .or. &
       rbuf(3) /= 100 * prv) then
      print '(a, i0)', 'mpi_fortran_f08: wrong ring message at rank ', rank
      call MPI_Abort(MPI_COMM_WORLD, 1)
   end if
   check = check + sum(rbuf(1:3))

   ! nonblocking ring, statuses ignored
   ival = rank + 1
   call MPI_Irecv(ibuf, 1, MPI_INTEGER, prv, 12, MPI_COMM_WORLD, reqs(1))
   call MPI_Isend(ival, 1, MPI_INTEGER, nxt, 12, MPI_COMM_WORLD, reqs(2))
   call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE)
   check = check + ibuf

   ! every other element of an array: `use mpi` passes a contiguous copy, the mpi_f08
   ! binding a descriptor it describes with a temporary datatype
   sec = [(10 * rank + i, i = 1, 8)]
   if (rank == 0) then
      call MPI_Send(sec(1:8:2), 4, MPI_INTEGER, 1, 14, MPI_COMM_WORLD)
   else if (rank == 1) then
      call MPI_Recv(row, 4, MPI_INTEGER, 0, 14, MPI_COMM_WORLD, status)
      check = check + sum(row)
   end if

   ! one row of a column-major 4x4 matrix: 4 blocks of 1 integer, stride 4
   call MPI_Type_vector(4, 1, 4, MPI_INTEGER, vec)
   call MPI_Type_commit(vec)
   if (rank == 0) then
      mat = reshape([(i, i = 1, 16)], [4, 4])
      call MPI_Send(mat(2, 1), 1, vec, 1, 13, MPI_COMM_WORLD)
   else if (rank == 1) then
      call MPI_Recv(row, 4, MPI_INTEGER, 0, 13, MPI_COMM_WORLD, status)
      check = check + row(1) + 10 * row(2) + 100 * row(3) + 1000 * row(4)
   end if
   call MPI_Type_free(vec)

   ! even and odd ranks, ordered by rank
   call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half)
   call MPI_Comm_rank(half, hrank)
   call MPI_Comm_size(half, hsize)
   call MPI_Barrier(half)
   call MPI_Comm_free(half)
   check = check + hrank * hsize

   call MPI_Info_create(info)
   phase = 'solve'
   call MPI_Info_set(info, 'tracefs_phase', phase)
   if (rank == 0) bc = [nranks, 7, 42]
   call MPI_Bcast(bc, 3, MPI_INTEGER, 0, MPI_COMM_WORLD)
   check = check + sum(bc)
   call MPI_Allreduce(MPI_IN_PLACE, check, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
   call MPI_Barrier(MPI_COMM_WORLD)
   call MPI_Info_delete(info, 'tracefs_phase')
   call MPI_Info_free(info)

   if (rank == 0) print '(a, i0, a, i0)', 'fortran size=', nranks, ' check=', check
   call MPI_Finalize()
end program mpi_fortran_f08
