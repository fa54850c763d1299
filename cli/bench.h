// rgpu bench: the same operations natively, through rgpu, and over the raw link, in one run.
#pragma once

namespace rgpu::cli {

int bench_main(int argc, char** argv, const char* lib_dir, const char* exe_dir);

}  // namespace rgpu::cli
