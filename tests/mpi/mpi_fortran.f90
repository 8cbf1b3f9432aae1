! A Fortran MPI program (`use mpi`) with known calls, traced by check_mpi.py like the C ones:
! MPICH's Fortran bindings call the C functions libtfsmpi.so wraps (Open MPI's call PMPI_ ones,
! which libtfsmpi-ompi.so routes to its wrappers). Every
! argument is fixed by the rank and the size, so the script can expect each rank's calls:
! a blocking ring (status array read back), a nonblocking ring completed with
! MPI_STATUSES_IGNORE, a strided array section and a strided derived datatype sent from
! rank 0 to rank 1, a split communicator, then a phase "solve" begun by MPI_Info_set (the
! name passed in a blank-padded variable) holding a broadcast, an in-place reduction and a
! barrier, ended by MPI_Info_delete (Open MPI refuses the empty value that also ends it).
! Rank 0 prints one line that every rank's data feeds, the same with and without tracing.
program mpi_fortran
   use mpi
   implicit none
   integer :: ierr, rank, nranks, nxt, prv, cnt, i
   integer :: status(MPI_STATUS_SIZE), reqs(2)
   integer :: sbuf(3), rbuf(4), ibuf, ival
   integer :: mat(4, 4), row(4), sec(8)
   integer :: vec, half, hrank, hsize, info
   integer :: bc(3), check
   character(len=16) :: phase

   call MPI_Init(ierr)
   call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
   call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
   nxt = mod(rank + 1, nranks)
   prv = mod(rank - 1 + nranks, nranks)
   check = 0

   ! blocking ring: 3 of 4 posted integers, rank 0 sends first so the ring cannot deadlock
   sbuf = [rank, 10 * rank, 100 * rank]
   rbuf = -1
   if (rank == 0) then
      call MPI_Send(sbuf, 3, MPI_INTEGER, nxt, 11, MPI_COMM_WORLD, ierr)
      call MPI_Recv(rbuf, 4, MPI_INTEGER, prv, 11, MPI_COMM_WORLD, status, ierr)
   else
      call MPI_Recv(rbuf, 4, MPI_INTEGER, prv, 11, MPI_COMM_WORLD, status, ierr)
      call MPI_Send(sbuf, 3, MPI_INTEGER, nxt, 11, MPI_COMM_WORLD, ierr)
   end if
   call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
   if (cnt /= 3 .or. status(MPI_SOURCE) /= prv .or. status(MPI_TAG) /= 11 .or. &
       rbuf(3) /= 100 * prv) then
      print '(a, i0)', 'mpi_fortran: wrong ring message at rank ', rank
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
   end if
   check = check + sum(rbuf(1:3))

   ! nonblocking ring, statuses ignored
   ival = rank + 1
   call MPI_Irecv(ibuf, 1, MPI_INTEGER, prv, 12, MPI_COMM_WORLD, reqs(1), ierr)
   call MPI_Isend(ival, 1, MPI_INTEGER, nxt, 12, MPI_COMM_WORLD, reqs(2), ierr)
   call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
   check = check + ibuf

   ! every other element of an array: `use mpi` passes a contiguous copy, the mpi_f08
   ! binding a descriptor it describes with a temporary datatype
   sec = [(10 * rank + i, i = 1, 8)]
   if (rank == 0) then
      call MPI_Send(sec(1:8:2), 4, MPI_INTEGER, 1, 14, MPI_COMM_WORLD, ierr)
   else if (rank == 1) then
      call MPI_Recv(row, 4, MPI_INTEGER, 0, 14, MPI_COMM_WORLD, status, ierr)
      check = check + sum(row)
   end if

   ! one row of a column-major 4x4 matrix: 4 blocks of 1 integer, stride 4
   call MPI_Type_vector(4, 1, 4, MPI_INTEGER, vec, ierr)
   call MPI_Type_commit(vec, ierr)
   if (rank == 0) then
      mat = reshape([(i, i = 1, 16)], [4, 4])
      call MPI_Send(mat(2, 1), 1, vec, 1, 13, MPI_COMM_WORLD, ierr)
   else if (rank == 1) then
      call MPI_Recv(row, 4, MPI_INTEGER, 0, 13, MPI_COMM_WORLD, status, ierr)
      check = check + row(1) + 10 * row(2) + 100 * row(3) + 1000 * row(4)
   end if
   call MPI_Type_free(vec, ierr)

   ! even and odd ranks, ordered by rank
   call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
   call MPI_Comm_rank(half, hrank, ierr)
   call MPI_Comm_size(half, hsize, ierr)
   call MPI_Barrier(half, ierr)
   call MPI_Comm_free(half, ierr)
   check = check + hrank * hsize

   call MPI_Info_create(info, ierr)
   phase = 'solve'
   call MPI_Info_set(info, 'tracefs_phase', phase, ierr)
   if (rank == 0) bc = [nranks, 7, 42]
   call MPI_Bcast(bc, 3, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
   check = check + sum(bc)
   call MPI_Allreduce(MPI_IN_PLACE, check, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
   call MPI_Barrier(MPI_COMM_WORLD, ierr)
   call MPI_Info_delete(info, 'tracefs_phase', ierr)
   call MPI_Info_free(info, ierr)

   if (rank == 0) print '(a, i0, a, i0)', 'fortran size=', nranks, ' check=', check
   call MPI_Finalize(ierr)
end program mpi_fortran
