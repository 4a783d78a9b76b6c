! SPDX-License-Identifier: BSD-3-Clause
! A plain Fortran MPI program (knows nothing of libcompmpi; run under LD_PRELOAD): an
! MPI_ALLREDUCE of REAL arrays (MPI_REAL, and MPI_IN_PLACE), and an MPI_BCAST of REAL data
! that rank 1 receives as one MPI_TYPE_CONTIGUOUS(n, MPI_REAL) while the others use n
! MPI_REAL. Results must lie within the 8-bit bitpack bound of the exact values (the
! default policy's widest error, as in t_plain_compressed) and be the same bits on every
! rank. The testlist checks the COMPMPI_STATS line to see the allreduce compressed.
program f_allreduce
  use mpi
  implicit none
  integer, parameter :: n = 65536
  real, allocatable :: x(:), y(:), b(:)
  double precision, allocatable :: exact(:), absum(:)
  integer :: ierr, rank, nprocs, r, i, it, errors, total, ctype, bad, rcomm
  double precision :: v

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
  allocate(x(n), y(n), b(n), exact(n), absum(n))
  errors = 0

  do it = 0, 1
    exact = 0
    absum = 0
    do r = 0, nprocs - 1
      do i = 1, n
        v = val(r, i, it)
        exact(i) = exact(i) + v
        absum(i) = absum(i) + abs(v)
      end do
    end do
    do i = 1, n
      x(i) = real(val(rank, i, it))
    end do
    if (it == 0) then
      call MPI_ALLREDUCE(x, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    else
      y = x
      call MPI_ALLREDUCE(MPI_IN_PLACE, y, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
    if (ierr /= MPI_SUCCESS) errors = errors + 1
    ! contributions and the sum each quantised to 8 bits: |y - exact| <= 3 S
    bad = count(.not. (abs(dble(y) - exact) <= 3 * absum + 1d-30))
    if (bad /= 0) then
      print '(a,i0,a,i0,a,i0)', 'rank ', rank, ': allreduce pass ', it, ': sums outside the bound: ', bad
      errors = errors + 1
    end if
    if (.not. same_on_all(y)) then
      print '(a,i0,a)', 'rank ', rank, ': allreduce results differ across ranks'
      errors = errors + 1
    end if
  end do

  ! bcast from rank 0; rank 1 describes the same n REALs as one contiguous type
  call MPI_TYPE_CONTIGUOUS(n, MPI_REAL, ctype, ierr)
  call MPI_TYPE_COMMIT(ctype, ierr)
  do i = 1, n
    b(i) = real(val(0, i, 7))
  end do
  if (rank /= 0) b = 1e6
  if (rank == 1) then
    call MPI_BCAST(b, 1, ctype, 0, MPI_COMM_WORLD, ierr)
  else
    call MPI_BCAST(b, n, MPI_REAL, 0, MPI_COMM_WORLD, ierr)
  end if
  bad = 0
  do i = 1, n
    v = real(val(0, i, 7))
    if (.not. (abs(b(i) - v) <= abs(v) + 1d-30) .or. (v /= 0 .and. b(i) * v < 0)) bad = bad + 1
  end do
  if (bad /= 0) then
    print '(a,i0,a,i0)', 'rank ', rank, ': bcast values outside the bound: ', bad
    errors = errors + 1
  end if
  ! the root keeps its input; the receivers hold the same bits among themselves
  call MPI_COMM_SPLIT(MPI_COMM_WORLD, merge(1, 0, rank == 0), rank, rcomm, ierr)
  if (rank /= 0) then
    if (.not. same_on(b, rcomm)) then
      print '(a,i0,a)', 'rank ', rank, ': bcast results differ across receivers'
      errors = errors + 1
    end if
  end if
  call MPI_COMM_FREE(rcomm, ierr)
  call MPI_TYPE_FREE(ctype, ierr)

  call MPI_ALLREDUCE(errors, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a)', ' No Errors'
    else
      print '(a,i0,a)', ' Found ', total, ' errors'
    end if
  end if
  call MPI_FINALIZE(ierr)
  if (total /= 0) stop 1

contains

  ! gradient-like values: a smooth per-rank pattern, scale varying by blocks of 512
  double precision function val(r, i, it)
    integer, intent(in) :: r, i, it
    val = sin(0.37d0 * i + 1.3d0 * r + 0.7d0 * it) * 10d0 ** (mod(i / 512 + r, 3) - 2)
  end function val

  logical function same_on_all(a)
    real, intent(in) :: a(:)
    same_on_all = same_on(a, MPI_COMM_WORLD)
  end function same_on_all

  ! every rank of comm holds the same bits: MAX and MIN of the integer bit patterns agree
  logical function same_on(a, comm)
    integer, intent(in) :: comm
    real, intent(in) :: a(:)
    integer :: bits(size(a)), hi(size(a)), lo(size(a)), e
    bits = transfer(a, bits)
    call MPI_ALLREDUCE(bits, hi, size(a), MPI_INTEGER, MPI_MAX, comm, e)
    call MPI_ALLREDUCE(bits, lo, size(a), MPI_INTEGER, MPI_MIN, comm, e)
    same_on = all(hi == bits) .and. all(lo == bits)
  end function same_on

end program f_allreduce
