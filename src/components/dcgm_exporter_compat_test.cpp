// gpud's dcgm-exporter compatibility rules (deploy/prometheus/dcgm-compat-rules.yml) against the
// facts of dcgm-exporter's counters file
// (testing/fixtures/dcgm/dcgm-exporter-default-counters.csv): every field there is either recorded
// by a rule, from a gpud metric of the same type and with dcgm-exporter's unit and labels, or named
// below as one gpud cannot serve, with the reason. The rules' values are checked by promtool
// (dcgm-compat-rules_test.yml, ctest prometheus_dcgm_compat_rules); this test checks that those
// promtool cases cover every served field with dcgm-exporter's labels.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "components/registry.h"

namespace gpud::components {
namespace {

const std::string kSource = GPUD_SOURCE_DIR;

struct DcgmField {
  std::string type;  // gauge, counter or label
  std::string unit;
  bool enabled = false;  // uncommented in dcgm-exporter's file
};

struct DcgmFacts {
  std::map<std::string, DcgmField> fields;
  std::vector<std::string> labels;  // on every GPU metric
};

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) out.push_back(trim(part));
  return out;
}

DcgmFacts read_facts() {
  DcgmFacts facts;
  std::ifstream in(kSource + "/testing/fixtures/dcgm/dcgm-exporter-default-counters.csv");
  std::string line;
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("label:", 0) == 0) {
      facts.labels.push_back(split_commas(line.substr(6)).at(0));
      continue;
    }
    auto cols = split_commas(line);
    EXPECT_EQ(cols.size(), 4U) << line;
    if (cols.size() != 4) continue;
    facts.fields[cols[0]] = {cols[1], cols[2], cols[3] == "yes"};
  }
  return facts;
}

// record name -> expression, for the DCGM series of the rule file.
std::map<std::string, std::string> dcgm_rules() {
  std::map<std::string, std::string> out;
  YAML::Node doc = YAML::LoadFile(kSource + "/deploy/prometheus/dcgm-compat-rules.yml");
  for (const auto& group : doc["groups"])
    for (const auto& rule : group["rules"]) {
      if (!rule["record"]) continue;
      const auto name = rule["record"].as<std::string>();
      if (name.rfind("DCGM_", 0) == 0) out[name] = rule["expr"].as<std::string>();
    }
  return out;
}

// The gpud metric a rule reads (the first accelerator_nvidia_* but the identity series).
std::string source_metric(const std::string& expr) {
  static const std::regex kMetric("accelerator_nvidia_[a-z0-9_]+");
  for (std::sregex_iterator it(expr.begin(), expr.end(), kMetric), end; it != end; ++it)
    if (it->str() != "accelerator_nvidia_gpu_info") return it->str();
  return "";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A gpud metric's unit, from its name (gpud names carry their unit).
std::string gpud_unit(const std::string& metric) {
  static const std::pair<const char*, const char*> kSuffixes[] = {
      {"_bytes_per_second", "B/s"},
      {"_percent", "%"},
      {"_celsius", "C"},
      {"_mhz", "MHz"},
      {"_milli_watts", "mW"},
      {"_milli_joules", "mJ"},
      {"_bytes", "B"},
      {"_last_code", "xid"},
  };
  for (const auto& [suffix, unit] : kSuffixes)
    if (ends_with(metric, suffix)) return unit;
  return "count";
}

// The fields of dcgm-exporter's file that gpud cannot serve, and why.
const std::map<std::string, std::string> kNotServed = {
    {"DCGM_FI_DEV_ENC_UTIL", "gpud does not read NVML's encoder utilisation"},
    {"DCGM_FI_DEV_DEC_UTIL", "gpud does not read NVML's decoder utilisation"},
    {"DCGM_FI_DEV_POWER_VIOLATION",
     "gpud does not read NVML's violation time counters; it reports the clock event reasons "
     "(accelerator_nvidia_clock_hw_slowdown*) as they are when checked"},
    {"DCGM_FI_DEV_THERMAL_VIOLATION", "as DCGM_FI_DEV_POWER_VIOLATION"},
    {"DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "as DCGM_FI_DEV_POWER_VIOLATION"},
    {"DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "as DCGM_FI_DEV_POWER_VIOLATION"},
    {"DCGM_FI_DEV_LOW_UTIL_VIOLATION", "as DCGM_FI_DEV_POWER_VIOLATION"},
    {"DCGM_FI_DEV_RELIABILITY_VIOLATION", "as DCGM_FI_DEV_POWER_VIOLATION"},
    {"DCGM_EXP_CLOCK_EVENTS_COUNT",
     "made by dcgm-exporter over its own event window, not a DCGM field; gpud serves "
     "accelerator_nvidia_clock_hw_slowdown*"},
    {"DCGM_EXP_XID_ERRORS_COUNT",
     "made by dcgm-exporter over its own window, not a DCGM field; gpud serves the counter "
     "accelerator_nvidia_xid_errors_total{xid=...} (increase() gives any window)"},
    {"DCGM_EXP_GPU_HEALTH_STATUS",
     "DCGM's health watches through dcgm-exporter; gpud's own verdict is "
     "accelerator_nvidia_gpu_health"},
    {"DCGM_EXP_P2P_STATUS",
     "made by dcgm-exporter; gpud judges NVLink P2P in accelerator-nvidia-nvlink (/v1/states)"},
    {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
     "gpud reads NVLink's CRC flit errors, not its data CRC errors"},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "gpud does not read NVLink throughput counters"},
    {"DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", "gpud does not read NVLink throughput counters"},
    {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gpud does not read vGPU licensing"},
    {"DCGM_FI_NVML_VERSION",
     "a label dcgm-exporter leaves off by default; gpud serves NVML's version in /v1/states "
     "(accelerator-nvidia-info), not on every series"},
    {"DCGM_FI_DEV_BRAND", "as DCGM_FI_NVML_VERSION (the brand)"},
    {"DCGM_FI_DEV_SERIAL", "as DCGM_FI_NVML_VERSION (the serial)"},
    {"DCGM_FI_DEV_OEM_INFOROM_VER", "gpud does not read InfoROM versions"},
    {"DCGM_FI_DEV_ECC_INFOROM_VER", "gpud does not read InfoROM versions"},
    {"DCGM_FI_DEV_POWER_INFOROM_VER", "gpud does not read InfoROM versions"},
    {"DCGM_FI_DEV_INFOROM_IMAGE_VER", "gpud does not read InfoROM versions"},
    {"DCGM_FI_DEV_VBIOS_VERSION", "gpud does not read the VBIOS version"},
};

// Fields gpud serves that dcgm-exporter's file does not list (DCGM fields all the same).
const std::set<std::string> kBeyondTheCountersFile = {"DCGM_FI_DEV_ROW_REMAP_PENDING"};

// Where gpud's source metric has another type than dcgm-exporter's, and why that stays.
const std::map<std::string, std::string> kTypeDifferences = {
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
     "gpud keeps GPUd's gauge; NVML's count only grows until the GPU is replaced"},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "as DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"},
    {"DCGM_FI_DEV_RETIRED_SBE", "gpud keeps GPUd's gauge; NVML's count only grows"},
    {"DCGM_FI_DEV_RETIRED_DBE", "gpud keeps GPUd's gauge; NVML's count only grows"},
    {"DCGM_FI_DEV_RETIRED_PENDING",
     "NVML answers a yes/no (1/0) for pending retirement, a gauge in gpud"},
};

// The label fields dcgm-exporter enables by default; the rules serve them as labels.
std::set<std::string> enabled_label_fields(const DcgmFacts& facts) {
  std::set<std::string> out;
  for (const auto& [name, f] : facts.fields)
    if (f.type == "label" && f.enabled) out.insert(name);
  return out;
}

TEST(DcgmExporterCompat, EveryCountersFileFieldIsServedOrNamedWithAReason) {
  const DcgmFacts facts = read_facts();
  ASSERT_GT(facts.fields.size(), 50U);
  const auto rules = dcgm_rules();
  const auto labels = enabled_label_fields(facts);
  for (const auto& [name, field] : facts.fields) {
    const bool recorded = rules.contains(name) || labels.contains(name);
    const bool excused = kNotServed.contains(name);
    EXPECT_NE(recorded, excused) << name
                                 << (recorded ? ": served and listed as not served"
                                              : ": neither served nor given a reason");
  }
  for (const auto& [name, expr] : rules)
    EXPECT_TRUE(facts.fields.contains(name) || kBeyondTheCountersFile.contains(name))
        << name << " is no field of dcgm-exporter's counters file";
  for (const auto& [name, reason] : kNotServed) {
    EXPECT_TRUE(facts.fields.contains(name)) << name;
    EXPECT_FALSE(reason.empty()) << name;
  }
  // The issue's fields, by name.
  for (const char* name :
       {"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"})
    EXPECT_TRUE(rules.contains(name)) << name;
}

// A rule converts gpud's unit to dcgm-exporter's, and only where they differ.
TEST(DcgmExporterCompat, ServedFieldsHaveDcgmExporterUnits) {
  const DcgmFacts facts = read_facts();
  // (gpud unit, DCGM unit) -> the operation in the rule.
  const std::map<std::pair<std::string, std::string>, std::string> kConversions = {
      {{"mW", "W"}, "/ 1000"},
      {{"B", "MiB"}, "/ 1048576"},
      {{"%", "ratio"}, "/ 100"},
  };
  for (const auto& [name, expr] : dcgm_rules()) {
    auto field = facts.fields.find(name);
    if (field == facts.fields.end()) continue;  // beyond the file: no unit to compare
    const std::string metric = source_metric(expr);
    ASSERT_FALSE(metric.empty()) << name;
    const std::string from = gpud_unit(metric), to = field->second.unit;
    if (from == to) {
      for (const auto& [units, op] : kConversions)
        EXPECT_EQ(expr.find(op), std::string::npos) << name << " converts " << metric;
      continue;
    }
    auto conversion = kConversions.find({from, to});
    ASSERT_NE(conversion, kConversions.end())
        << name << ": no conversion from " << metric << " (" << from << ") to " << to;
    EXPECT_NE(expr.find(conversion->second), std::string::npos)
        << name << " lacks '" << conversion->second << "' from " << metric;
  }
}

// The type every gpud metric family is declared with ("gauge" or "counter"), as /metrics writes it:
// the registry of all components (their constructors declare their families) and of the kernel-log
// rules, each family given one series so that the exposition shows it. A family nobody declared
// has no help text of its own and is left out.
std::map<std::string, std::string> declared_types(const std::set<std::string>& names) {
  Config config;
  MetricRegistry metrics;
  ComponentContext ctx;
  ctx.config = &config;
  ctx.metrics = &metrics;
  Registry registry;
  EXPECT_TRUE(register_all(registry, ctx));
  for (const auto& rules : all_kernel_log_rules())
    if (rules.describe_metrics) rules.describe_metrics(metrics);
  for (const auto& name : names) metrics.set("", name, 0);
  std::map<std::string, std::string> types;
  std::istringstream text(metrics.prometheus_text());
  std::string line, described;
  while (std::getline(text, line)) {
    std::istringstream words(line);
    std::string hash, what, name, rest;
    words >> hash >> what >> name >> rest;
    if (hash != "#") continue;
    if (what == "HELP") described = rest != name ? name : "";
    if (what == "TYPE" && name == described) types[name] = rest;
  }
  return types;
}

// gpud's source metric has dcgm-exporter's type (gauge or counter), but where listed with why.
TEST(DcgmExporterCompat, ServedFieldsHaveDcgmExporterTypes) {
  const DcgmFacts facts = read_facts();
  std::map<std::string, std::string> sources;  // DCGM field -> gpud metric
  for (const auto& [name, expr] : dcgm_rules())
    if (facts.fields.contains(name)) sources[name] = source_metric(expr);
  std::set<std::string> metrics;
  for (const auto& [name, metric] : sources) metrics.insert(metric);
  const auto types = declared_types(metrics);
  for (const auto& [name, metric] : sources) {
    auto type = types.find(metric);
    ASSERT_NE(type, types.end()) << name << ": gpud declares no metric " << metric;
    if (kTypeDifferences.contains(name))
      EXPECT_NE(type->second, facts.fields.at(name).type)
          << name << " is listed as differing but is not";
    else
      EXPECT_EQ(type->second, facts.fields.at(name).type) << name << " from " << metric;
  }
}

// Every served field has a promtool case whose expected series carries each of dcgm-exporter's
// labels (and the enabled label fields), with pci_bus_id in NVML's form. promtool checks that the
// rules produce exactly those series.
TEST(DcgmExporterCompat, ServedFieldsCarryDcgmExporterLabelsInTheRuleTests) {
  const DcgmFacts facts = read_facts();
  ASSERT_FALSE(facts.labels.empty());
  std::set<std::string> wanted(facts.labels.begin(), facts.labels.end());
  for (const auto& f : enabled_label_fields(facts)) wanted.insert(f);
  static const std::regex kLabel("([A-Za-z_][A-Za-z0-9_]*)=\"([^\"]*)\"");
  static const std::regex kNvmlBusId("[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\\.[0-7]");
  std::set<std::string> covered;
  YAML::Node doc = YAML::LoadFile(kSource + "/deploy/prometheus/dcgm-compat-rules_test.yml");
  for (const auto& test : doc["tests"])
    for (const auto& expr_test : test["promql_expr_test"])
      for (const auto& sample : expr_test["exp_samples"]) {
        const auto text = sample["labels"].as<std::string>();
        const std::string name = text.substr(0, text.find('{'));
        std::map<std::string, std::string> labels;
        for (std::sregex_iterator it(text.begin(), text.end(), kLabel), end; it != end; ++it)
          labels[(*it)[1]] = (*it)[2];
        bool all = true;
        for (const auto& l : wanted) all = all && labels.contains(l);
        if (all && std::regex_match(labels["pci_bus_id"], kNvmlBusId)) covered.insert(name);
      }
  for (const auto& [name, expr] : dcgm_rules())
    EXPECT_TRUE(covered.contains(name))
        << name << ": no promtool case expects it with all of dcgm-exporter's labels";
}

}  // namespace
}  // namespace gpud::components
