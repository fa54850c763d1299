// rgpu bench's application row: the median step time of examples/torch_train.py's small CNN
// (batch 64), run natively and through rgpu, when python3 can import torch.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rgpu::cli {

// examples/torch_train.py next to this build or installation; "" when there is none.
std::string find_train_script(const char* exe_dir);
// Runs `python3 script --model cnn --steps N` with `env` added; its "step_ms" line, or nothing
// when it failed (a line on stderr says why).
std::optional<double> cnn_step_ms(const std::string& script,
                                  const std::vector<std::pair<std::string, std::string>>& env,
                                  int steps);

}  // namespace rgpu::cli
