// Kubernetes' name rules: the one validator's answer for each rule at its boundaries, as the
// apiserver gives it (k8s.io/apimachinery pkg/util/validation, core helper IsExtendedResourceName).
#include "common/k8s_names.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using erdma::common::check_name;
using erdma::common::describe;
using erdma::common::NameFault;
using erdma::common::NamePart;
using erdma::common::NameRule;

namespace {

struct Case {
  std::string in;
  NameFault fault;  // NameFault::None: valid
  size_t at = 0;    // where the fault is (checked only for faults that have a place)
  NamePart part = NamePart::Whole;
};

void check_table(NameRule rule, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    CAPTURE(c.in);
    const auto got = check_name(rule, c.in);
    CHECK(got.rule == rule);
    CHECK(got.fault == c.fault);
    CHECK(got.ok() == (c.fault == NameFault::None));
    if (c.fault != NameFault::None) {
      CHECK(got.part == c.part);
      if (c.fault != NameFault::TooLong && c.fault != NameFault::Empty) CHECK(got.at == c.at);
    }
  }
}

const std::string k63(63, 'a');
const std::string k64(64, 'a');

}  // namespace

TEST_CASE("DNS-1123 label: 1-63 of [a-z0-9-], alphanumeric at both ends, no dots") {
  check_table(NameRule::Dns1123Label, {
                                          {"a", NameFault::None},
                                          {"0", NameFault::None},
                                          {"team-a", NameFault::None},
                                          {"a--b", NameFault::None},
                                          {"123-abc", NameFault::None},
                                          {k63, NameFault::None},
                                          {k64, NameFault::TooLong},
                                          {"", NameFault::Empty},
                                          {"-a", NameFault::BadStart, 0},
                                          {"a-", NameFault::BadEnd, 1},
                                          {"-", NameFault::BadStart, 0},
                                          {"Team-a", NameFault::BadChar, 0},
                                          {"team-A", NameFault::BadChar, 5},
                                          {"a_b", NameFault::BadChar, 1},
                                          {"a.b", NameFault::Dot, 1},
                                          {"a b", NameFault::BadChar, 1},
                                          {"a,b", NameFault::BadChar, 1},
                                          {std::string("a\0b", 3), NameFault::BadChar, 1},
                                      });
}

TEST_CASE("DNS-1123 subdomain: at most 253, dot-separated labels, no limit per label") {
  const std::string k253 = std::string(126, 'a') + "." + std::string(126, 'b');
  const std::string k254 = k253 + "c";
  REQUIRE(k253.size() == 253);
  check_table(NameRule::Dns1123Subdomain,
              {
                  {"a", NameFault::None},
                  {"example.com", NameFault::None},
                  {"a-1.b-2.c", NameFault::None},
                  {"node-1.zone-a.example", NameFault::None},
                  {k63, NameFault::None},
                  {k64, NameFault::None},  // the apiserver's regex has no 63 limit per label
                  {k64 + "." + k64, NameFault::None},
                  {std::string(253, 'a'), NameFault::None},
                  {k253, NameFault::None},
                  {k254, NameFault::TooLong},
                  {std::string(254, 'a'), NameFault::TooLong},
                  {"", NameFault::Empty},
                  {".a", NameFault::BadStart, 0},
                  {"a.", NameFault::BadEnd, 1},
                  {"a..b", NameFault::EmptyPart, 2},
                  {"-a", NameFault::BadStart, 0},
                  {"a-", NameFault::BadEnd, 1},
                  {"a.-b", NameFault::BadStart, 2},
                  {"a-.b", NameFault::BadEnd, 1},
                  {"Example.com", NameFault::BadChar, 0},
                  {"example.Com", NameFault::BadChar, 8},
                  {"a_b.com", NameFault::BadChar, 1},
                  {"a/b", NameFault::BadChar, 1},
              });
  // The edges of an inner part are told apart from the edges of the whole name.
  CHECK(check_name(NameRule::Dns1123Subdomain, "a.-b").inner);
  CHECK(check_name(NameRule::Dns1123Subdomain, "a-.b").inner);
  CHECK_FALSE(check_name(NameRule::Dns1123Subdomain, "-a.b").inner);
  CHECK_FALSE(check_name(NameRule::Dns1123Subdomain, "a.b-").inner);
}

TEST_CASE("qualified name: [<subdomain>/]<name>, the name 1-63 of [A-Za-z0-9-_.], alphanumeric at both ends") {
  check_table(NameRule::QualifiedName, {
                                           {"MyName", NameFault::None},
                                           {"my.name", NameFault::None},
                                           {"123-abc", NameFault::None},
                                           {"a_b", NameFault::None},
                                           {"example.com/MyName", NameFault::None},
                                           {"app.kubernetes.io/name", NameFault::None},
                                           {k63, NameFault::None},
                                           {"example.com/" + k63, NameFault::None},
                                           {k64, NameFault::TooLong},
                                           {"example.com/" + k64, NameFault::TooLong, 0, NamePart::Name},
                                           {std::string(253, 'a') + "/x", NameFault::None},
                                           {std::string(254, 'a') + "/x", NameFault::TooLong, 0, NamePart::Prefix},
                                           {"", NameFault::Empty},
                                           {"_a", NameFault::BadStart, 0},
                                           {"a.", NameFault::BadEnd, 1},
                                           {"-a", NameFault::BadStart, 0},
                                           {"a b", NameFault::BadChar, 1},
                                           {"/a", NameFault::EmptyPrefix, 0, NamePart::Prefix},
                                           {"example.com/", NameFault::Empty, 0, NamePart::Name},
                                           {"a/b/c", NameFault::ExtraSlash, 3},
                                           {"Example.com/a", NameFault::BadChar, 0, NamePart::Prefix},
                                           {"a_b/c", NameFault::BadChar, 1, NamePart::Prefix},
                                           {"example.com/-a", NameFault::BadStart, 12, NamePart::Name},
                                           {"example.com/a-", NameFault::BadEnd, 13, NamePart::Name},
                                       });
}

TEST_CASE("label value: empty, or up to 63 of [A-Za-z0-9-_.], alphanumeric at both ends") {
  check_table(NameRule::LabelValue, {
                                        {"", NameFault::None},
                                        {"v1.2_x-Y", NameFault::None},
                                        {k63, NameFault::None},
                                        {k64, NameFault::TooLong},
                                        {"-a", NameFault::BadStart, 0},
                                        {"a_", NameFault::BadEnd, 1},
                                        {"a/b", NameFault::BadChar, 1},
                                        {"a b", NameFault::BadChar, 1},
                                    });
}

TEST_CASE("extended resource name: <domain>/<name> outside kubernetes.io, not requests.*, domain at most 244") {
  check_table(NameRule::ExtendedResourceName,
              {
                  {"aliyun/erdma", NameFault::None},
                  {"aliyun/erdma-smcr", NameFault::None},
                  {"example.com/rdma_shared-1.x", NameFault::None},
                  {"example.com/RDMA", NameFault::None},
                  {"example.com/" + k63, NameFault::None},
                  {std::string(244, 'a') + "/x", NameFault::None},
                  {k64 + ".example/x", NameFault::None},  // no 63 limit per label of the domain
                  {"example.com/" + k64, NameFault::TooLong, 0, NamePart::Name},
                  {std::string(245, 'a') + "/x", NameFault::TooLong, 0, NamePart::Prefix},
                  {"", NameFault::Empty},
                  {"erdma", NameFault::NoPrefix},
                  {"kubernetes.io/erdma", NameFault::ReservedDomain},
                  {"a.kubernetes.io/erdma", NameFault::ReservedDomain},
                  {"mykubernetes.io/erdma", NameFault::ReservedDomain},
                  {"kubernetes.io.example/erdma", NameFault::None},
                  {"requests.example.com/erdma", NameFault::RequestsPrefix},
                  {"aliyun/erdma/x", NameFault::ExtraSlash, 12},
                  {"/erdma", NameFault::EmptyPrefix, 0, NamePart::Prefix},
                  {"aliyun/", NameFault::Empty, 0, NamePart::Name},
                  {"Aliyun/erdma", NameFault::BadChar, 0, NamePart::Prefix},
                  {"aliyun./erdma", NameFault::BadEnd, 6, NamePart::Prefix},
                  {"aliyun/-erdma", NameFault::BadStart, 7, NamePart::Name},
                  {"aliyun/erdma.", NameFault::BadEnd, 12, NamePart::Name},
                  {"aliyun/er dma", NameFault::BadChar, 9, NamePart::Name},
              });
}

TEST_CASE("the bool forms answer as check_name") {
  using namespace erdma::common;
  CHECK(is_dns1123_label("a-1"));
  CHECK_FALSE(is_dns1123_label("a.1"));
  CHECK(is_dns1123_subdomain("a.1"));
  CHECK_FALSE(is_dns1123_subdomain("a..1"));
  CHECK(is_qualified_name("a.b/C"));
  CHECK_FALSE(is_qualified_name("a.b/C/"));
  CHECK(is_label_value(""));
  CHECK_FALSE(is_label_value("-"));
  CHECK(is_extended_resource_name("a.b/c"));
  CHECK_FALSE(is_extended_resource_name("c"));
}

TEST_CASE("describe: the rule, what failed where, and the rule spelled out with an example") {
  struct Case {
    NameRule rule;
    std::string in, role, want;
  };
  const std::vector<Case> cases{
      {NameRule::Dns1123Label, "Team-a", "",
       "is not a DNS-1123 label: it has the upper-case 'T' (character 1); a DNS-1123 label is 1 to 63 lower-case "
       "letters, digits and '-', starting and ending with a letter or digit, such as \"my-name\""},
      {NameRule::Dns1123Label, "kube_system", "a namespace name",
       "is not a namespace name (a DNS-1123 label): it has '_' (character 5), which is not allowed; a DNS-1123 label "
       "is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit, such as \"my-name\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(describe(check_name(c.rule, c.in), c.role) == c.want);
  }
  // The part after the rule's name, for each kind of fault.
  struct Part {
    NameRule rule;
    std::string in, want;
  };
  const std::vector<Part> parts{
      {NameRule::Dns1123Label, "", ": it is empty;"},
      {NameRule::Dns1123Label, k64, ": it is 64 characters long, over the limit of 63;"},
      {NameRule::Dns1123Label, "-a", ": it starts with '-';"},
      {NameRule::Dns1123Label, "a-", ": it ends with '-';"},
      {NameRule::Dns1123Label, "a.b", ": it has a '.' (character 2), which a label cannot have;"},
      {NameRule::Dns1123Label, std::string("a\x01", 2), ": it has \\x01 (character 2), which is not allowed;"},
      {NameRule::Dns1123Subdomain, std::string(254, 'a'), ": it is 254 characters long, over the limit of 253;"},
      {NameRule::Dns1123Subdomain, "a..b", ": it has two dots in a row (character 3);"},
      {NameRule::Dns1123Subdomain, "a.-b", ": it has a part starting with '-' (character 3, after a '.');"},
      {NameRule::Dns1123Subdomain, "a-.b", ": it has a part ending with '-' (character 2, before a '.');"},
      {NameRule::QualifiedName, "/x", ": the prefix before '/' is empty;"},
      {NameRule::QualifiedName, "Ex.com/x", ": the prefix before '/' has the upper-case 'E' (character 1);"},
      {NameRule::QualifiedName, "ex.com/x_", ": the name after '/' ends with '_';"},
      {NameRule::QualifiedName, "a/b/c", ": it has a second '/' (character 4);"},
      {NameRule::ExtendedResourceName, "erdma", ": it has no <domain>/ in front;"},
      {NameRule::ExtendedResourceName, "kubernetes.io/erdma",
       ": its domain is kubernetes.io or ends in it, which Kubernetes keeps for its own resources;"},
      {NameRule::ExtendedResourceName, "requests.a/b",
       ": it starts with \"requests.\", which Kubernetes keeps for quota names;"},
      {NameRule::ExtendedResourceName, std::string(245, 'a') + "/x",
       ": the prefix before '/' is 245 characters long, over the limit of 244;"},
  };
  for (const auto& p : parts) {
    CAPTURE(p.in);
    const std::string got = describe(check_name(p.rule, p.in));
    CHECK(got.find(p.want) != std::string::npos);
  }
  CHECK(describe(check_name(NameRule::Dns1123Label, "ok")).empty());
}
