// A library with a __managed__ variable, built as a fat binary for managed_vars.cu's
// cudaLibraryLoadFromFile / cudaLibraryGetManaged checks.
__managed__ int lib_counter = 42;

extern "C" __global__ void lib_bump(int add) { lib_counter += add; }
