! The older Fortran interface (include 'mpif.h') with MPI_BOTTOM: each rank describes two
! separate integers by their absolute addresses (MPI_Get_address) in one struct datatype per
! direction (integers only: without explicit interfaces gfortran rejects one dummy argument
! passed several types), passes them around a ring with MPI_Sendrecv from and to MPI_BOTTOM
! (MPI_STATUS_IGNORE), then sums the integers at rank 0, in place there only. Rank 0 prints
! one line, the same with and without tracing.
program mpi_fortran_mpifh
   implicit none
   include 'mpif.h'
   integer :: ierr, rank, nranks, nxt, prv, total
   integer :: si, ri, ts, tr
   integer :: sd, rd
   integer :: blens(2), types(2)
   integer(kind=MPI_ADDRESS_KIND) :: disp(2)

   call MPI_Init(ierr)
   call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
   call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
   nxt = mod(rank + 1, nranks)
   prv = mod(rank - 1 + nranks, nranks)

   si = rank + 1
   sd = 100 * rank
   blens = 1
   types = MPI_INTEGER
   call MPI_Get_address(si, disp(1), ierr)
   call MPI_Get_address(sd, disp(2), ierr)
   call MPI_Type_create_struct(2, blens, disp, types, ts, ierr)
   call MPI_Type_commit(ts, ierr)
   call MPI_Get_address(ri, disp(1), ierr)
   call MPI_Get_address(rd, disp(2), ierr)
   call MPI_Type_create_struct(2, blens, disp, types, tr, ierr)
   call MPI_Type_commit(tr, ierr)
   call MPI_Sendrecv(MPI_BOTTOM, 1, ts, nxt, 21, MPI_BOTTOM, 1, tr, prv, 21, &
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
   call MPI_Type_free(ts, ierr)
   call MPI_Type_free(tr, ierr)
   if (ri /= prv + 1 .or. rd /= 100 * prv) then
      print '(a, i0)', 'mpi_fortran_mpifh: wrong values at rank ', rank
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
   end if

   total = ri + rd
   if (rank == 0) then
      call MPI_Reduce(MPI_IN_PLACE, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
      print '(a, i0, a, i0)', 'mpif.h size=', nranks, ' total=', total
   else
      call MPI_Reduce(total, total, 1, MPI_INTEGER, MPI_SUM, 0, MPI_COMM_WORLD, ierr)
   end if
   call MPI_Finalize(ierr)
end program mpi_fortran_mpifh
