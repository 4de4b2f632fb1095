/* A fake libnvidia-ml for tests: the few NVML entry points hetbench uses.
 * Driven by environment variables read at nvmlInit_v2:
 *   FAKE_NVML_FAIL_INIT=1     nvmlInit_v2 fails (as with a driver/library mismatch)
 *   FAKE_NVML_GPUS=N          number of GPUs (default 1)
 *   FAKE_NVML_NO_ENERGY=1     nvmlDeviceGetTotalEnergyConsumption is NOT_SUPPORTED (pre-Volta)
 *   FAKE_NVML_MJ_PER_CALL=N   the energy counter grows by N mJ per call (default 25000)
 *   FAKE_NVML_POWER_MW=N      power usage in mW (default 250000)
 * and at every reading call:
 *   FAKE_NVML_FAIL_READS=1    energy and power calls fail with GPU_IS_LOST (15)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void* nvmlDevice_t;
enum { NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
       NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_DRIVER_NOT_LOADED = 9 };

static int g_init, g_gpus = 1, g_no_energy, g_power_mw = 250000;
static unsigned long long g_mj_per_call = 25000, g_energy[16];
static int g_devices[16];

static int env_int(const char* name, int def) {
  const char* v = getenv(name);
  return v ? atoi(v) : def;
}

nvmlReturn_t nvmlInit_v2(void) {
  if (env_int("FAKE_NVML_FAIL_INIT", 0)) return NVML_ERROR_DRIVER_NOT_LOADED;
  g_gpus = env_int("FAKE_NVML_GPUS", 1);
  if (g_gpus > 16) g_gpus = 16;
  g_no_energy = env_int("FAKE_NVML_NO_ENERGY", 0);
  g_mj_per_call = (unsigned long long)env_int("FAKE_NVML_MJ_PER_CALL", 25000);
  g_power_mw = env_int("FAKE_NVML_POWER_MW", 250000);
  memset(g_energy, 0, sizeof(g_energy));
  g_init = 1;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlShutdown(void) { g_init = 0; return NVML_SUCCESS; }
const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count) {
  if (!g_init) return NVML_ERROR_UNINITIALIZED;
  *count = (unsigned)g_gpus;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* dev) {
  if (!g_init) return NVML_ERROR_UNINITIALIZED;
  if (i >= (unsigned)g_gpus) return NVML_ERROR_INVALID_ARGUMENT;
  g_devices[i] = (int)i;
  *dev = &g_devices[i];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char* name, unsigned len) {
  snprintf(name, len, "Fake GPU %d", *(int*)dev);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long* mj) {
  if (g_no_energy) return NVML_ERROR_NOT_SUPPORTED;
  if (env_int("FAKE_NVML_FAIL_READS", 0)) return 15;
  int i = *(int*)dev;
  g_energy[i] += g_mj_per_call;
  *mj = g_energy[i];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned* mw) {
  (void)dev;
  if (env_int("FAKE_NVML_FAIL_READS", 0)) return 15;
  *mw = (unsigned)g_power_mw;
  return NVML_SUCCESS;
}

/* Inventory entry points (GPU discovery):
 *   FAKE_NVML_MEMORY_MIB=N    total memory per GPU (default 81920, an 80 GB card)
 *   FAKE_NVML_DRIVER=S        driver version (default "535.104.05")
 *   FAKE_NVML_LIMIT_MW=N      power management limit (default 400000)
 */
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char* uuid, unsigned len) {
  snprintf(uuid, len, "GPU-fa4e0000-0000-4000-8000-00000000000%d", *(int*)dev);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t* mem) {
  (void)dev;
  mem->total = (unsigned long long)env_int("FAKE_NVML_MEMORY_MIB", 81920) << 20;
  mem->used = 0;
  mem->free = mem->total;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned len) {
  const char* v = getenv("FAKE_NVML_DRIVER");
  snprintf(version, len, "%s", v ? v : "535.104.05");
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t dev, unsigned* mw) {
  (void)dev;
  *mw = (unsigned)env_int("FAKE_NVML_LIMIT_MW", 400000);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t dev, int* major, int* minor) {
  (void)dev;
  *major = 8;
  *minor = 0;
  return NVML_SUCCESS;
}
