// erdma-agent: the eRDMA node agent (kubelet device plugin for aliyun/erdma) and its admin tools.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "agent/cli/commands.hpp"
#include "agent/cli/dispatch.hpp"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  try {
    return erdma::agent::dispatch(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
  } catch (const std::exception& e) {
    // Process edge: anything unexpected ends here as one line.
    std::cerr << "error: " << e.what() << "\n";
    return erdma::agent::kExitFailure;
  }
}
