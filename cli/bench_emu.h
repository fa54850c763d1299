// rgpu bench --emu SPEC: the rgpu rows over TCP and the raw link rows again under RGPU_NET_EMU's
// network emulation (transport/tcp/net_emu.h), labelled transport "tcp+emu", beside the plain ones.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/bench.h"

namespace rgpu::cli {

inline constexpr const char* kEmuTransport = "tcp+emu";

// --emu's argument in canonical form ("rtt=25us,gbps=100"), or nothing (a line on stderr says
// what is wrong with it).
std::optional<std::string> emu_spec(const std::string& arg);
// Whether the rgpud this client reaches announces the same emulation in its hello (it was started
// with RGPU_NET_EMU=spec); when not, a warning on stderr says what it announced.  `what` receives
// a note for the table.
bool server_emulates(const std::string& spec, std::string& what);
// The worker's environment for the emulated rgpu run.
std::vector<std::pair<std::string, std::string>> emu_worker_env(const std::string& lib_dir,
                                                                const std::string& spec);
// Runs `measure` (the raw link's rows) with both ends of the TCP connections it makes emulated.
void with_emulated_links(const std::string& spec, const std::function<void()>& measure);

// The plain TCP rows of `all` against the emulated ones, with the emulated round trip against
// the spec.
void print_emu_rows(const std::string& spec, uint64_t max_bytes, const std::vector<Result>& all);

}  // namespace rgpu::cli
