// Tests for webhook/core/quantity.hpp.
#include "webhook/core/quantity.hpp"

#include <doctest/doctest.h>

using namespace erdma::webhook;

TEST_CASE("quantity signs") {
  struct Case {
    const char* in;
    QuantitySign want;
  };
  for (const Case& c :
       {Case{"1", QuantitySign::Positive}, Case{"64", QuantitySign::Positive}, Case{"+1", QuantitySign::Positive},
        Case{"0", QuantitySign::Zero}, Case{"000", QuantitySign::Zero}, Case{"0.0", QuantitySign::Zero},
        Case{"-1", QuantitySign::Negative}, Case{"-0", QuantitySign::Zero}, Case{"500m", QuantitySign::Positive},
        Case{"1Ki", QuantitySign::Positive}, Case{"2Gi", QuantitySign::Positive}, Case{"1e3", QuantitySign::Positive},
        Case{"1E-3", QuantitySign::Positive}, Case{"1E", QuantitySign::Positive}, Case{".5", QuantitySign::Positive},
        Case{"1.", QuantitySign::Positive}, Case{"0n", QuantitySign::Zero}, Case{"1u", QuantitySign::Positive}}) {
    CAPTURE(c.in);
    auto r = quantity_sign(c.in);
    REQUIRE(r.ok());
    CHECK(*r == c.want);
  }
}

TEST_CASE("invalid quantities are errors that quote the input") {
  for (const char* bad :
       {"", "one", "1x", "1Kb", "1e", "1e+", "--1", "+", ".", "1..0", "1 ", " 1", "1i", "0x10", "1KiB", "1.2.3"}) {
    CAPTURE(bad);
    auto r = quantity_sign(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message == "\"" + std::string(bad) + "\" is not a valid quantity");
  }
}
