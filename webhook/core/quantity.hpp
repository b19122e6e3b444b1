// Kubernetes resource quantities, as far as the webhook needs them: is a quantity positive?
#pragma once

#include <string_view>

#include "common/result.hpp"

namespace erdma::webhook {

enum class QuantitySign { Zero, Positive, Negative };

// Parses a quantity string in Kubernetes' canonical grammar (e.g. "1", "+2", "0.5", "500m", "1Ki",
// "1e3") and returns its sign. Anything outside the grammar is InvalidArgument.
[[nodiscard]] Result<QuantitySign> quantity_sign(std::string_view text);

}  // namespace erdma::webhook
