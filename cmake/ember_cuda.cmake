# The CUDA backend (EMBER_CUDA=ON): kernels live beside their ops as src/**/*.cu; the backend glue in
# src/backend/cuda/. Library ember_cuda; GPU tests (*_cuda_test.cpp) form test_cuda and skip without a GPU.
# With no GPU on the build machine CMake cannot detect the architecture: default to Hopper (sm_90a).
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90a)
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
# CMake 3.25 does not know nvcc's C++20 flag (nvcc ≥ 12 has it): tell it.
set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
message(STATUS "ember: CUDA backend enabled (architectures ${CMAKE_CUDA_ARCHITECTURES})")

file(GLOB_RECURSE cuda_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*.cu
     ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.cpp)
list(FILTER cuda_srcs EXCLUDE REGEX "_(test|bench)\\.(cpp|cu)$")
add_library(ember_cuda STATIC ${cuda_srcs})
target_include_directories(ember_cuda PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(ember_cuda PUBLIC ember_models ember_ops CUDA::cudart CUDA::cublas)
target_compile_options(ember_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
target_compile_definitions(ember_cuda PUBLIC EMBER_HAVE_CUDA=1)
set_target_properties(ember_cuda PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)

if(EMBER_TESTS)
  file(GLOB_RECURSE cuda_tests CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/*_cuda_test.cpp)
  if(cuda_tests)
    find_package(GTest REQUIRED)
    add_executable(test_cuda ${cuda_tests})
    target_link_libraries(test_cuda PRIVATE ember_cuda GTest::gtest GTest::gtest_main)
    target_compile_definitions(test_cuda PRIVATE EMBER_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    gtest_discover_tests(test_cuda DISCOVERY_TIMEOUT 120)
  endif()
endif()

# GPU benchmarks: each bench/gpu/<name>.cu is one executable <name> (they call the shipped kernels).
file(GLOB gpu_benches CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/bench/gpu/*.cu)
foreach(b ${gpu_benches})
  get_filename_component(name ${b} NAME_WE)
  add_executable(${name} ${b})
  target_link_libraries(${name} PRIVATE ember_cuda)
  target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
endforeach()
