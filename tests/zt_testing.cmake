# Test helpers shared by every tests/<layer>/CMakeLists.txt.
#
#   zt_unit_test(NAME src...)            one gtest binary, registered with ctest (label "unit")
#   zt_mpi_test(NAME src... NP 1 2 3 4)   one binary, registered once per rank count under mpirun
#                                         (NP is multi-value: sources go before it)
#
# mpirun runs as root (CI) and with more ranks than cores, so every launch carries
# --allow-run-as-root --oversubscribe. OpenBLAS/OpenMP are pinned to one thread per rank.
set(ZT_MPIEXEC ${MPIEXEC_EXECUTABLE})
set(ZT_MPI_FLAGS --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader,tcp
    --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1
    -x OMP_WAIT_POLICY=PASSIVE)

function(zt_unit_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE zerotrain_lib GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 300
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endfunction()

# Under -DZT_TSAN=ON, Open MPI's own (uninstrumented) internals are suppressed: tests/comm/tsan.supp.
set(ZT_MPI_TEST_ENV "OMPI_MCA_mpi_yield_when_idle=1")
if(ZT_TSAN)
  list(APPEND ZT_MPI_TEST_ENV "TSAN_OPTIONS=halt_on_error=1 suppressions=${PROJECT_SOURCE_DIR}/tests/comm/tsan.supp")
endif()

function(zt_mpi_test name)
  cmake_parse_arguments(ZT "" "" "NP" ${ARGN})
  add_executable(${name} ${ZT_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE zerotrain_lib GTest::gtest)
  foreach(np ${ZT_NP})
    add_test(NAME ${name}_np${np}
             COMMAND ${ZT_MPIEXEC} ${ZT_MPI_FLAGS} -np ${np} $<TARGET_FILE:${name}>)
    set_tests_properties(${name}_np${np} PROPERTIES LABELS mpi TIMEOUT 600 PROCESSORS ${np}
                         ENVIRONMENT "${ZT_MPI_TEST_ENV}")
  endforeach()
endfunction()
