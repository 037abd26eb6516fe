// Our own declarations of the subset of the NVML C ABI that gpud uses (types, constants, return
// codes, struct layouts and function pointer types), written from the public documentation so that
// no NVIDIA header is vendored. Shared by the loader and by the fake library in testing/fake_nvml.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpud::nvml {

// ---- opaque handles (pointer-sized structs, as in nvml.h) ----
struct nvmlDevice_st;
struct nvmlEventSet_st;
struct nvmlDevice_t {
  nvmlDevice_st* handle;
};
struct nvmlEventSet_t {
  nvmlEventSet_st* handle;
};
struct nvmlGpmSample_st;
struct nvmlGpmSample_t {
  nvmlGpmSample_st* handle;
};

// ---- return codes ----
using nvmlReturn_t = int;  // a C enum: int-sized on every ABI we target
inline constexpr nvmlReturn_t NVML_SUCCESS = 0;
inline constexpr nvmlReturn_t NVML_ERROR_UNINITIALIZED = 1;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_ARGUMENT = 2;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
inline constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
inline constexpr nvmlReturn_t NVML_ERROR_ALREADY_INITIALIZED = 5;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_FOUND = 6;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_POWER = 8;
inline constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
inline constexpr nvmlReturn_t NVML_ERROR_TIMEOUT = 10;
inline constexpr nvmlReturn_t NVML_ERROR_IRQ_ISSUE = 11;
inline constexpr nvmlReturn_t NVML_ERROR_LIBRARY_NOT_FOUND = 12;
inline constexpr nvmlReturn_t NVML_ERROR_FUNCTION_NOT_FOUND = 13;
inline constexpr nvmlReturn_t NVML_ERROR_CORRUPTED_INFOROM = 14;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_IS_LOST = 15;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_REQUIRED = 16;
inline constexpr nvmlReturn_t NVML_ERROR_OPERATING_SYSTEM = 17;
inline constexpr nvmlReturn_t NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18;
inline constexpr nvmlReturn_t NVML_ERROR_IN_USE = 19;
inline constexpr nvmlReturn_t NVML_ERROR_MEMORY = 20;
inline constexpr nvmlReturn_t NVML_ERROR_NO_DATA = 21;
inline constexpr nvmlReturn_t NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22;
inline constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_RESOURCES = 23;
inline constexpr nvmlReturn_t NVML_ERROR_FREQ_NOT_SUPPORTED = 24;
inline constexpr nvmlReturn_t NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25;
inline constexpr nvmlReturn_t NVML_ERROR_DEPRECATED = 26;
inline constexpr nvmlReturn_t NVML_ERROR_NOT_READY = 27;
inline constexpr nvmlReturn_t NVML_ERROR_GPU_NOT_FOUND = 28;
inline constexpr nvmlReturn_t NVML_ERROR_INVALID_STATE = 29;
inline constexpr nvmlReturn_t NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30;
inline constexpr nvmlReturn_t NVML_ERROR_UNKNOWN = 999;

// ---- enums passed by value (C enums: int-sized) ----
using nvmlEnableState_t = int;
inline constexpr nvmlEnableState_t NVML_FEATURE_DISABLED = 0;
inline constexpr nvmlEnableState_t NVML_FEATURE_ENABLED = 1;

using nvmlBrandType_t = int;
inline constexpr nvmlBrandType_t NVML_BRAND_UNKNOWN = 0;
inline constexpr nvmlBrandType_t NVML_BRAND_QUADRO = 1;
inline constexpr nvmlBrandType_t NVML_BRAND_TESLA = 2;
inline constexpr nvmlBrandType_t NVML_BRAND_NVS = 3;
inline constexpr nvmlBrandType_t NVML_BRAND_GRID = 4;
inline constexpr nvmlBrandType_t NVML_BRAND_GEFORCE = 5;
inline constexpr nvmlBrandType_t NVML_BRAND_TITAN = 6;
inline constexpr nvmlBrandType_t NVML_BRAND_NVIDIA_VAPPS = 7;
inline constexpr nvmlBrandType_t NVML_BRAND_NVIDIA_VPC = 8;
inline constexpr nvmlBrandType_t NVML_BRAND_NVIDIA_VCS = 9;
inline constexpr nvmlBrandType_t NVML_BRAND_NVIDIA_VWS = 10;
inline constexpr nvmlBrandType_t NVML_BRAND_NVIDIA_CLOUD_GAMING = 11;
inline constexpr nvmlBrandType_t NVML_BRAND_QUADRO_RTX = 12;
inline constexpr nvmlBrandType_t NVML_BRAND_NVIDIA_RTX = 13;
inline constexpr nvmlBrandType_t NVML_BRAND_NVIDIA = 14;
inline constexpr nvmlBrandType_t NVML_BRAND_GEFORCE_RTX = 15;
inline constexpr nvmlBrandType_t NVML_BRAND_TITAN_RTX = 16;

using nvmlTemperatureSensors_t = int;
inline constexpr nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU = 0;
// GPUd asks for sensor 1 to read the HBM temperature; drivers without it answer NOT_SUPPORTED or
// INVALID_ARGUMENT.
inline constexpr nvmlTemperatureSensors_t kTemperatureSensorHbm = 1;

using nvmlTemperatureThresholds_t = int;
inline constexpr nvmlTemperatureThresholds_t NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0;
inline constexpr nvmlTemperatureThresholds_t NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1;
inline constexpr nvmlTemperatureThresholds_t NVML_TEMPERATURE_THRESHOLD_MEM_MAX = 2;
inline constexpr nvmlTemperatureThresholds_t NVML_TEMPERATURE_THRESHOLD_GPU_MAX = 3;

using nvmlClockType_t = int;
inline constexpr nvmlClockType_t NVML_CLOCK_GRAPHICS = 0;
inline constexpr nvmlClockType_t NVML_CLOCK_SM = 1;
inline constexpr nvmlClockType_t NVML_CLOCK_MEM = 2;
inline constexpr nvmlClockType_t NVML_CLOCK_VIDEO = 3;

using nvmlMemoryErrorType_t = int;
inline constexpr nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_CORRECTED = 0;
inline constexpr nvmlMemoryErrorType_t NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;

using nvmlEccCounterType_t = int;
inline constexpr nvmlEccCounterType_t NVML_VOLATILE_ECC = 0;   // reset when the driver loads
inline constexpr nvmlEccCounterType_t NVML_AGGREGATE_ECC = 1;  // lifetime

using nvmlMemoryLocation_t = int;
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_L1_CACHE = 0;
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_L2_CACHE = 1;
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_DRAM = 2;  // == DEVICE_MEMORY
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_REGISTER_FILE = 3;
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_TEXTURE_MEMORY = 4;
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_TEXTURE_SHM = 5;
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_CBU = 6;
inline constexpr nvmlMemoryLocation_t NVML_MEMORY_LOCATION_SRAM = 7;
inline constexpr int kMemoryLocationCount = 8;

using nvmlPageRetirementCause_t = int;
inline constexpr nvmlPageRetirementCause_t
    NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0;
inline constexpr nvmlPageRetirementCause_t NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1;

using nvmlNvLinkErrorCounter_t = int;
inline constexpr nvmlNvLinkErrorCounter_t NVML_NVLINK_ERROR_DL_REPLAY = 0;
inline constexpr nvmlNvLinkErrorCounter_t NVML_NVLINK_ERROR_DL_RECOVERY = 1;
inline constexpr nvmlNvLinkErrorCounter_t NVML_NVLINK_ERROR_DL_CRC_FLIT = 2;
inline constexpr nvmlNvLinkErrorCounter_t NVML_NVLINK_ERROR_DL_CRC_DATA = 3;
inline constexpr nvmlNvLinkErrorCounter_t NVML_NVLINK_ERROR_DL_ECC_DATA = 4;
inline constexpr unsigned int NVML_NVLINK_MAX_LINKS = 36;  // NVML 13; older headers say 18

using nvmlComputeMode_t = int;
inline constexpr nvmlComputeMode_t NVML_COMPUTEMODE_DEFAULT = 0;
inline constexpr nvmlComputeMode_t NVML_COMPUTEMODE_EXCLUSIVE_THREAD = 1;
inline constexpr nvmlComputeMode_t NVML_COMPUTEMODE_PROHIBITED = 2;
inline constexpr nvmlComputeMode_t NVML_COMPUTEMODE_EXCLUSIVE_PROCESS = 3;

// ---- event types (bits) ----
inline constexpr unsigned long long nvmlEventTypeSingleBitEccError = 0x1ULL;
inline constexpr unsigned long long nvmlEventTypeDoubleBitEccError = 0x2ULL;
inline constexpr unsigned long long nvmlEventTypePState = 0x4ULL;
inline constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x8ULL;
inline constexpr unsigned long long nvmlEventTypeClock = 0x10ULL;
inline constexpr unsigned long long kXidUnknown =
    999;  // eventData for an Xid the driver can't name

// ---- clocks event (throttle) reasons bitmask ----
inline constexpr unsigned long long nvmlClocksEventReasonGpuIdle = 0x1ULL;
inline constexpr unsigned long long nvmlClocksEventReasonApplicationsClocksSetting = 0x2ULL;
inline constexpr unsigned long long nvmlClocksEventReasonSwPowerCap = 0x4ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwSlowdown = 0x8ULL;
inline constexpr unsigned long long nvmlClocksEventReasonSyncBoost = 0x10ULL;
inline constexpr unsigned long long nvmlClocksEventReasonSwThermalSlowdown = 0x20ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwThermalSlowdown = 0x40ULL;
inline constexpr unsigned long long nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x80ULL;
inline constexpr unsigned long long nvmlClocksEventReasonDisplayClockSetting = 0x100ULL;
inline constexpr unsigned long long kClocksEventReasonsHwSlowdownMask =
    nvmlClocksThrottleReasonHwSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown |
    nvmlClocksThrottleReasonHwPowerBrakeSlowdown;

// ---- P2P ----
using nvmlGpuP2PStatus_t = int;
inline constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_OK = 0;
inline constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED = 1;
inline constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_GPU_NOT_SUPPORTED = 2;
inline constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED = 3;
inline constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_DISABLED_BY_REGKEY = 4;
inline constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_NOT_SUPPORTED = 5;
inline constexpr nvmlGpuP2PStatus_t NVML_P2P_STATUS_UNKNOWN = 6;
using nvmlGpuP2PCapsIndex_t = int;
inline constexpr nvmlGpuP2PCapsIndex_t NVML_P2P_CAPS_INDEX_NVLINK = 2;

// ---- fabric ----
inline constexpr int NVML_GPU_FABRIC_UUID_LEN = 16;
using nvmlGpuFabricState_t = unsigned char;
inline constexpr nvmlGpuFabricState_t NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0;
inline constexpr nvmlGpuFabricState_t NVML_GPU_FABRIC_STATE_NOT_STARTED = 1;
inline constexpr nvmlGpuFabricState_t NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2;
inline constexpr nvmlGpuFabricState_t NVML_GPU_FABRIC_STATE_COMPLETED = 3;
inline constexpr unsigned char NVML_GPU_FABRIC_HEALTH_SUMMARY_NOT_SUPPORTED = 0;
inline constexpr unsigned char NVML_GPU_FABRIC_HEALTH_SUMMARY_HEALTHY = 1;
inline constexpr unsigned char NVML_GPU_FABRIC_HEALTH_SUMMARY_UNHEALTHY = 2;
inline constexpr unsigned char NVML_GPU_FABRIC_HEALTH_SUMMARY_LIMITED_CAPACITY = 3;
// healthMask sub-fields: 2 bits each (0 not supported, 1 true, 2 false) except the 4-bit
// incorrect-configuration field.
inline constexpr unsigned int kFabricHealthShiftDegradedBw = 0;
inline constexpr unsigned int kFabricHealthShiftRouteRecovery = 2;
inline constexpr unsigned int kFabricHealthShiftRouteUnhealthy = 4;
inline constexpr unsigned int kFabricHealthShiftAccessTimeoutRecovery = 6;
inline constexpr unsigned int kFabricHealthShiftIncorrectConfiguration = 8;
inline constexpr unsigned int kFabricHealthMask2Bits = 0x3;
inline constexpr unsigned int kFabricHealthMask4Bits = 0xf;
inline constexpr unsigned int kFabricHealthTrue = 1;
// Incorrect-configuration values: 0 not supported, 1 none, then the reasons.
inline constexpr unsigned int kFabricConfigNone = 1;
inline constexpr unsigned int kFabricConfigIncorrectSysguid = 2;
inline constexpr unsigned int kFabricConfigIncorrectChassisSn = 3;
inline constexpr unsigned int kFabricConfigNoPartition = 4;
inline constexpr unsigned int kFabricConfigInsufficientNvlinks = 5;

// ---- buffer sizes ----
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
inline constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
inline constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned int NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE = 80;
inline constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
inline constexpr unsigned int NVML_DEVICE_SERIAL_BUFFER_SIZE = 30;
inline constexpr unsigned int NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE = 32;
inline constexpr unsigned int NVML_GSP_FIRMWARE_VERSION_BUF_SIZE = 0x40;

// ---- structs (exact LP64 layouts) ----
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlMemory_v2_t {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

struct nvmlProcessInfo_t {  // nvmlProcessInfo_v2_t, used by the _v2 and _v3 process calls
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
inline constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE_ULL = ~0ULL;

struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct nvmlTemperature_t {  // nvmlTemperature_v1_t
  unsigned int version;
  nvmlTemperatureSensors_t sensorType;
  int temperature;
};

struct nvmlMarginTemperature_t {  // nvmlMarginTemperature_v1_t
  unsigned int version;
  int marginTemperature;
};

struct nvmlGpuFabricInfo_t {  // the deprecated nvmlDeviceGetGpuFabricInfo
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
};

struct nvmlGpuFabricInfoV_t {  // nvmlGpuFabricInfo_v3_t (v2: the same without healthSummary)
  unsigned int version;
  unsigned char clusterUuid[NVML_GPU_FABRIC_UUID_LEN];
  nvmlReturn_t status;
  unsigned int cliqueId;
  nvmlGpuFabricState_t state;
  unsigned int healthMask;
  unsigned char healthSummary;
};

// nvmlPlatformInfo_v2_t (nvmlDeviceGetPlatformInfo, R570+: the GB200/GB300 tray's identity). v1
// has the same size and offsets (rackGuid where v2 has chassisSerialNumber).
inline constexpr int NVML_PLATFORM_INFO_ID_LEN = 16;
struct nvmlPlatformInfo_t {
  unsigned int version;
  unsigned char ibGuid[NVML_PLATFORM_INFO_ID_LEN];
  unsigned char chassisSerialNumber[NVML_PLATFORM_INFO_ID_LEN];  // not NUL-terminated when full
  unsigned char slotNumber;
  unsigned char trayIndex;
  unsigned char hostId;
  unsigned char peerType;
  unsigned char moduleId;
};

struct nvmlGpmSupport_t {
  unsigned int version;
  unsigned int isSupportedDevice;
};

// GPM metrics between two samples (nvmlGpmMetricsGet). The array length in nvml.h
// (NVML_GPM_METRIC_MAX) has grown between releases; the driver only touches the first numMetrics
// entries, so a generous fixed size is compatible with every version of the struct (version 1).
inline constexpr unsigned int NVML_GPM_METRICS_GET_VERSION = 1;
inline constexpr unsigned int kGpmMetricArraySize = 333;
struct nvmlGpmMetric_t {
  unsigned int metricId;
  nvmlReturn_t nvmlReturn;
  double value;  // valid when nvmlReturn is NVML_SUCCESS
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;
};
struct nvmlGpmMetricsGet_t {
  unsigned int version;
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;
  nvmlGpmSample_t sample2;
  nvmlGpmMetric_t metrics[kGpmMetricArraySize];
};
// nvmlGpmMetricId_t values gpud reads: 0.0-100.0 percentages, but PCIE_*_PER_SEC in MiB/s.
inline constexpr unsigned int NVML_GPM_METRIC_GRAPHICS_UTIL = 1;
inline constexpr unsigned int NVML_GPM_METRIC_SM_UTIL = 2;
inline constexpr unsigned int NVML_GPM_METRIC_SM_OCCUPANCY = 3;
inline constexpr unsigned int NVML_GPM_METRIC_INTEGER_UTIL = 4;
inline constexpr unsigned int NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5;
inline constexpr unsigned int NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6;
inline constexpr unsigned int NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7;
inline constexpr unsigned int NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9;
inline constexpr unsigned int NVML_GPM_METRIC_FP64_UTIL = 11;
inline constexpr unsigned int NVML_GPM_METRIC_FP32_UTIL = 12;
inline constexpr unsigned int NVML_GPM_METRIC_FP16_UTIL = 13;
inline constexpr unsigned int NVML_GPM_METRIC_DRAM_BW_UTIL = 10;
inline constexpr unsigned int NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20;
inline constexpr unsigned int NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21;

static_assert(sizeof(nvmlDevice_t) == sizeof(void*));
static_assert(sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlMemory_v2_t) == 40);
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlProcessInfo_t) == 24);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);
static_assert(sizeof(nvmlEventData_t) == 32);
static_assert(sizeof(nvmlGpuFabricInfo_t) == 28);
static_assert(sizeof(nvmlGpuFabricInfoV_t) == 40);
static_assert(sizeof(nvmlPlatformInfo_t) == 44);
static_assert(offsetof(nvmlPlatformInfo_t, chassisSerialNumber) == 20);
static_assert(sizeof(nvmlTemperature_t) == 12);
static_assert(sizeof(nvmlMarginTemperature_t) == 8);
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24);

// NVML_STRUCT_VERSION(T, v) = sizeof(T_vN) | (v << 24)
constexpr unsigned int struct_version(unsigned int size, unsigned int v) {
  return size | (v << 24);
}
inline constexpr unsigned int nvmlMemory_v2 = struct_version(sizeof(nvmlMemory_v2_t), 2);
inline constexpr unsigned int nvmlTemperature_v1 = struct_version(sizeof(nvmlTemperature_t), 1);
inline constexpr unsigned int nvmlMarginTemperature_v1 =
    struct_version(sizeof(nvmlMarginTemperature_t), 1);
inline constexpr unsigned int nvmlGpuFabricInfo_v3 =
    struct_version(sizeof(nvmlGpuFabricInfoV_t), 3);
inline constexpr unsigned int nvmlGpuFabricInfo_v2 = struct_version(36, 2);
inline constexpr unsigned int nvmlPlatformInfo_v2 = struct_version(sizeof(nvmlPlatformInfo_t), 2);
inline constexpr unsigned int NVML_GPM_SUPPORT_VERSION = 1;
static_assert(nvmlMemory_v2 == 0x02000028);
static_assert(nvmlTemperature_v1 == 0x0100000C);
static_assert(nvmlGpuFabricInfo_v3 == 0x03000028);
static_assert(nvmlGpuFabricInfo_v2 == 0x02000024);
static_assert(nvmlPlatformInfo_v2 == 0x0200002c);
static_assert(nvmlMarginTemperature_v1 == 0x01000008);

// ---- function pointer types ----
using PfnVoid = nvmlReturn_t (*)();
using PfnErrorString = const char* (*)(nvmlReturn_t);
using PfnString = nvmlReturn_t (*)(char*, unsigned int);
using PfnIntOut = nvmlReturn_t (*)(int*);
using PfnUintOut = nvmlReturn_t (*)(unsigned int*);
using PfnHandleByIndex = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using PfnDevString = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using PfnDevStringNoLen = nvmlReturn_t (*)(nvmlDevice_t, char*);
using PfnDevUint = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using PfnDevInt = nvmlReturn_t (*)(nvmlDevice_t, int*);
using PfnDevUll = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using PfnDevUintUint = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*);
using PfnDevIntInt = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);
using PfnDevPci = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using PfnDevEnumOut = nvmlReturn_t (*)(nvmlDevice_t, int*);  // brand, persistence, compute mode
using PfnDevEnumEnumOut = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);  // ECC mode
using PfnDevTemperature = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperatureSensors_t, unsigned int*);
using PfnDevTemperatureV = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperature_t*);
using PfnDevMargin = nvmlReturn_t (*)(nvmlDevice_t, nvmlMarginTemperature_t*);
using PfnDevThreshold = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperatureThresholds_t, unsigned int*);
using PfnDevClock = nvmlReturn_t (*)(nvmlDevice_t, nvmlClockType_t, unsigned int*);
using PfnDevMemory = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using PfnDevMemoryV2 = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*);
using PfnDevUtilization = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using PfnDevTotalEcc = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemoryErrorType_t, nvmlEccCounterType_t,
                                        unsigned long long*);
using PfnDevMemoryErrorCounter = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemoryErrorType_t,
                                                  nvmlEccCounterType_t, nvmlMemoryLocation_t,
                                                  unsigned long long*);
using PfnDevRemappedRows = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*,
                                            unsigned int*, unsigned int*);
using PfnDevRetiredPages = nvmlReturn_t (*)(nvmlDevice_t, nvmlPageRetirementCause_t, unsigned int*,
                                            unsigned long long*);
using PfnDevProcesses = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*);
using PfnDevProcessesV1 = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
using PfnDevNvLinkState = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlEnableState_t*);
using PfnDevNvLinkErrorCounter = nvmlReturn_t (*)(nvmlDevice_t, unsigned int,
                                                  nvmlNvLinkErrorCounter_t, unsigned long long*);
using PfnDevFabricInfo = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpuFabricInfo_t*);
using PfnDevFabricInfoV = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpuFabricInfoV_t*);
using PfnDevPlatformInfo = nvmlReturn_t (*)(nvmlDevice_t, nvmlPlatformInfo_t*);
using PfnDevGpmSupport = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSupport_t*);
using PfnP2PStatus = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t, nvmlGpuP2PCapsIndex_t,
                                      nvmlGpuP2PStatus_t*);
using PfnGpmSampleAlloc = nvmlReturn_t (*)(nvmlGpmSample_t*);
using PfnGpmSampleFree = nvmlReturn_t (*)(nvmlGpmSample_t);
using PfnGpmSampleGet = nvmlReturn_t (*)(nvmlDevice_t, nvmlGpmSample_t);
using PfnGpmMetricsGet = nvmlReturn_t (*)(nvmlGpmMetricsGet_t*);
using PfnEventSetCreate = nvmlReturn_t (*)(nvmlEventSet_t*);
using PfnEventSetFree = nvmlReturn_t (*)(nvmlEventSet_t);
using PfnRegisterEvents = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
using PfnEventSetWait = nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);

}  // namespace gpud::nvml
