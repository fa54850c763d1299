// Gate words (see Executor::gate_wait): opened by a store and a futex wakeup, waited for on the CPU
// by backends that have no device-side wait (the host test double, or a driver without stream
// memory operations).
#pragma once

#include <cstdint>

namespace rgpu::backend {

// True when (int32_t)(*word - value) >= 0: the gate is open for `value` (wraps like CUDA's GEQ).
bool gate_passed(const uint32_t* word, uint32_t value);
// Stores `value` (if it moves the gate forward) and wakes CPU waiters.  Never blocks.
void open_gate(uint32_t* word, uint32_t value);
// Waits on the CPU until gate_passed(word, value).
void wait_gate(uint32_t* word, uint32_t value);

}  // namespace rgpu::backend
