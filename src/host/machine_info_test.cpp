#include "host/machine_info.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/time_util.h"
#include "core/version.h"

namespace gpud::host {
namespace {

using nlohmann::json;

std::string fixture(std::string_view sub) {
  return std::string(GPUD_SOURCE_DIR) + "/testing/fixtures/host-os/" + std::string(sub);
}

json load_schema() {
  std::ifstream in(fixture("machine-info-schema.json"));
  return json::parse(in);
}

// Checks every field present in `v` whose name the schema knows against its swagger type.
void validate(const json& v, const json& schema, const json& defs, const std::string& path,
              std::vector<std::string>& errors) {
  if (schema.contains("$ref")) {
    std::string ref = schema["$ref"];
    validate(v, defs[ref.substr(ref.rfind('/') + 1)], defs, path, errors);
    return;
  }
  if (schema.contains("allOf")) {
    for (const auto& s : schema["allOf"]) validate(v, s, defs, path, errors);
    return;
  }
  std::string type = schema.value("type", "");
  auto fail = [&] { errors.push_back(path + ": want " + type + ", got " + v.dump()); };
  if (type == "string") {
    if (!v.is_string()) fail();
  } else if (type == "integer") {
    if (!v.is_number_integer()) fail();
  } else if (type == "boolean") {
    if (!v.is_boolean()) fail();
  } else if (type == "array") {
    if (!v.is_array()) return fail();
    for (size_t i = 0; i < v.size(); ++i)
      validate(v[i], schema["items"], defs, path + "[" + std::to_string(i) + "]", errors);
  } else if (type == "object") {
    if (!v.is_object()) return fail();
    for (const auto& [key, sub] : schema["properties"].items())
      if (v.contains(key)) validate(v[key], sub, defs, path + "." + key, errors);
  }
}

std::vector<std::string> validate_machine_info(const json& info) {
  json schema = load_schema();
  std::vector<std::string> errors;
  validate(info, schema["definitions"]["MachineInfo"], schema["definitions"], "", errors);
  return errors;
}

TEST(MachineInfo, RecordedTreeMatchesSwaggerTypes) {
  json info = collect_machine_info(HostFs(fixture("real")));
  EXPECT_EQ(validate_machine_info(info), std::vector<std::string>{});
  EXPECT_EQ(info["kernelVersion"], "6.18.44-fc-v782");
  EXPECT_EQ(info["osImage"], "Debian GNU/Linux 12 (bookworm)");
  EXPECT_EQ(info["operatingSystem"], "linux");
  EXPECT_EQ(info["hostname"], "vm");
  EXPECT_EQ(info["bootID"], "ed49d400-2d9f-4fe1-93a3-0c2220a31542");
  EXPECT_EQ(info["uptime"], format_rfc3339(from_unix_seconds(1796025890)));
  EXPECT_EQ(info["gpudVersion"], kVersion);
  EXPECT_EQ(info["cpuInfo"]["logicalCores"], 2);
  EXPECT_EQ(info["cpuInfo"]["type"], "AMD EPYC");
  EXPECT_EQ(info["cpuInfo"]["manufacturer"], "AuthenticAMD");
  EXPECT_FALSE(info["cpuInfo"]["architecture"].get<std::string>().empty());
  EXPECT_GT(info["memoryInfo"]["totalBytes"].get<int64_t>(), 0);
  EXPECT_EQ(info["memoryInfo"]["totalBytes"].get<int64_t>() % 1024, 0);
  ASSERT_EQ(info["diskInfo"]["blockDevices"].size(), 1u);
  EXPECT_EQ(info["diskInfo"]["blockDevices"][0]["name"], "vda");
  EXPECT_EQ(info["diskInfo"]["containerRootDisk"], "vda");
}

TEST(MachineInfo, GpuFieldsAreEmptyForNvmlToFill) {
  json info = collect_machine_info(HostFs(fixture("real")));
  EXPECT_EQ(info["gpuDriverVersion"], "");
  EXPECT_EQ(info["cudaVersion"], "");
  EXPECT_EQ(info["gpuInfo"]["product"], "");
  EXPECT_EQ(info["gpuInfo"]["manufacturer"], "");
  EXPECT_EQ(info["gpuInfo"]["architecture"], "");
  EXPECT_TRUE(info["gpuInfo"]["gpus"].is_array());
  EXPECT_TRUE(info["gpuInfo"]["gpus"].empty());
}

TEST(MachineInfo, BlockDeviceFieldsHaveSwaggerTypes) {
  json info = collect_machine_info(HostFs(fixture("block")));
  EXPECT_EQ(validate_machine_info(info), std::vector<std::string>{});
  const json& devs = info["diskInfo"]["blockDevices"];
  ASSERT_EQ(devs.size(), 5u);
  for (const json& d : devs) {
    for (const char* key : {"name", "type", "serial", "wwn", "vendor", "model", "rev", "mountPoint",
                            "fsType", "partUUID"})
      EXPECT_TRUE(d[key].is_string()) << key;
    EXPECT_TRUE(d["size"].is_number_integer());
    EXPECT_TRUE(d["used"].is_number_integer());
    EXPECT_TRUE(d["rota"].is_boolean());
    EXPECT_TRUE(d["parents"].is_array());
    EXPECT_TRUE(d["children"].is_array());
  }
  EXPECT_EQ(devs[1]["name"], "nvme0n1");
  EXPECT_EQ(devs[1]["size"].get<int64_t>(), int64_t{1875385008} * 512);
  EXPECT_EQ(devs[1]["children"], json({"nvme0n1p1", "nvme0n1p2"}));
  EXPECT_EQ(devs[4]["rota"], true);
  EXPECT_EQ(info["diskInfo"]["containerRootDisk"], "nvme0n1p2");
}

TEST(MachineInfo, SparseTreeStillHasEveryFieldWithTheRightType) {
  json info = collect_machine_info(HostFs(fixture("sparse")));
  EXPECT_EQ(validate_machine_info(info), std::vector<std::string>{});
  EXPECT_EQ(info["osImage"], "");
  EXPECT_EQ(info["bootID"], "");
  EXPECT_EQ(info["machineID"], "0123456789abcdef0123456789abcdef");
  EXPECT_EQ(info["memoryInfo"]["totalBytes"], 1048576 * 1024);
  EXPECT_EQ(info["cpuInfo"]["logicalCores"], 2);
}

// A GH200 node (Grace, Ubuntu's 64 KiB-page kernel): the CPU named as GPUd names it, memory from
// /proc/meminfo's kB whatever the page size.
TEST(MachineInfo, GraceNodeHasItsCpuAndMemory) {
  json info = collect_machine_info(HostFs(fixture("grace")));
  EXPECT_EQ(validate_machine_info(info), std::vector<std::string>{});
  EXPECT_EQ(info["cpuInfo"]["type"], "Neoverse-V2");
  EXPECT_EQ(info["cpuInfo"]["manufacturer"], "ARM");
  EXPECT_EQ(info["cpuInfo"]["logicalCores"], 72);
  EXPECT_EQ(info["memoryInfo"]["totalBytes"], int64_t{493597440} * 1024);
  EXPECT_EQ(info["kernelVersion"], "6.8.0-1013-nvidia-64k");
  EXPECT_EQ(info["osImage"], "Ubuntu 22.04.4 LTS");
}

TEST(MachineInfo, MissingRootNeverFails) {
  json info = collect_machine_info(HostFs(fixture("does-not-exist")));
  EXPECT_EQ(validate_machine_info(info), std::vector<std::string>{});
  for (const char* key : {"kernelVersion", "osImage", "hostname", "bootID", "machineID", "uptime"})
    EXPECT_EQ(info[key], "") << key;
  EXPECT_EQ(info["cpuInfo"]["logicalCores"], 0);
  EXPECT_TRUE(info["diskInfo"]["blockDevices"].empty());
}

TEST(MachineInfo, SchemaValidatorCatchesWrongTypes) {
  json info = collect_machine_info(HostFs(fixture("sparse")));
  info["cpuInfo"]["logicalCores"] = "2";
  info["memoryInfo"]["totalBytes"] = 1.5;
  EXPECT_EQ(validate_machine_info(info).size(), 2u);
}

TEST(MachineInfo, SmokeOnThisMachineHasShape) {
  json info = collect_machine_info(HostFs("/"));
  EXPECT_EQ(validate_machine_info(info), std::vector<std::string>{});
  EXPECT_FALSE(info["kernelVersion"].get<std::string>().empty());
  EXPECT_GT(info["cpuInfo"]["logicalCores"].get<int64_t>(), 0);
  EXPECT_TRUE(parse_time(info["uptime"].get<std::string>()).has_value());
}

}  // namespace
}  // namespace gpud::host
