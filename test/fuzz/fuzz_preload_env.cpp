// Fuzz target: the environment strings libsmc-preload.so reads in every process it is loaded into
// (SMC_PRELOAD_MODE, SMC_SNDBUF / SMC_RCVBUF, SMC_DEBUG). A size that parses is positive and fits
// an int; a mode that does not parse leaves the default.
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "preload_logic.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);  // NUL-terminated, as getenv gives
  int value = -1;
  if (smc_preload_parse_size(text.c_str(), &value) == 0 && value <= 0) std::abort();
  enum smc_preload_mode mode = SMC_PRELOAD_MODE_IPPROTO_SMC;
  if (smc_preload_parse_mode(text.c_str(), &mode) != 0 && mode != SMC_PRELOAD_MODE_AUTO) std::abort();
  (void)smc_preload_debug_enabled(text.c_str());
  return 0;
}
