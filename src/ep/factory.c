/*
 * The factory's function table (see factory.h). It asks ORT for API version EP_ORT_API_VERSION
 * and sets ort_version_supported to the same number, so ORT reads only the fields that existed
 * then and the plugin loads into every ORT from 1.23 on.
 */
#include "ep/factory.h"
#include "ep/profiler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ep_factory *self(const OrtEpFactory *f) { return (ep_factory *)f; }

/* The EP's name is fixed (whatever name the library was registered under): provider options
 * are keyed on it (ep.mlxexecutionprovider.<key>). */
static const char *ORT_API_CALL get_name(const OrtEpFactory *f) {
  (void)f;
  return EP_NAME;
}
static const char *ORT_API_CALL get_vendor(const OrtEpFactory *f) {
  (void)f;
  return EP_VENDOR;
}
static uint32_t ORT_API_CALL get_vendor_id(const OrtEpFactory *f) {
  (void)f;
  return 0;
}
static const char *ORT_API_CALL get_version(const OrtEpFactory *f) {
  (void)f;
  return EP_VERSION;
}

static OrtStatus *ORT_API_CALL get_supported_devices(OrtEpFactory *f,
                                                     const OrtHardwareDevice *const *devices,
                                                     size_t num_devices, OrtEpDevice **ep_devices,
                                                     size_t max_ep_devices, size_t *count) {
  ep_factory *fac = self(f);
  *count = 0;
  bool gpu = mx_device_available(MX_DEVICE_GPU);
  for (size_t i = 0; i < num_devices && *count < max_ep_devices; i++) {
    OrtHardwareDeviceType type = fac->ort->HardwareDevice_Type(devices[i]);
    if (type != OrtHardwareDeviceType_CPU && !(gpu && type == OrtHardwareDeviceType_GPU)) continue;
    OrtKeyValuePairs *meta = NULL;
    fac->ort->CreateKeyValuePairs(&meta);
    fac->ort->AddKeyValuePair(meta, "mlx_version", mx_version());
    fac->ort->AddKeyValuePair(meta, "mlx_device",
                              type == OrtHardwareDeviceType_GPU ? "gpu" : "cpu");
    OrtEpDevice *dev = NULL;
    OrtStatus *st = fac->ep_api->CreateEpDevice(f, devices[i], meta, NULL, &dev);
    fac->ort->ReleaseKeyValuePairs(meta);
    if (st) return st;
    ep_devices[(*count)++] = dev;
  }
  return NULL;
}

static OrtStatus *ORT_API_CALL create_ep(OrtEpFactory *f, const OrtHardwareDevice *const *devices,
                                         const OrtKeyValuePairs *const *metadata, size_t n,
                                         const OrtSessionOptions *so, const OrtLogger *logger,
                                         OrtEp **out) {
  (void)devices, (void)metadata, (void)n;
  return ep_create(self(f), so, logger, out);
}

static void ORT_API_CALL release_ep(OrtEpFactory *f, OrtEp *ep) {
  (void)f;
  ep_destroy(ep);
}

static OrtStatus *ORT_API_CALL validate_compat(OrtEpFactory *f,
                                               const OrtHardwareDevice *const *devices, size_t n,
                                               const char *info,
                                               OrtCompiledModelCompatibility *result) {
  (void)f, (void)devices, (void)n, (void)info;
  *result = OrtCompiledModelCompatibility_EP_NOT_APPLICABLE;
  return NULL;
}

static OrtStatus *ORT_API_CALL create_allocator(OrtEpFactory *f, const OrtMemoryInfo *info,
                                                const OrtKeyValuePairs *options,
                                                OrtAllocator **out) {
  (void)f, (void)info, (void)options;
  *out = NULL; /* inputs and outputs live in ORT's CPU memory */
  return NULL;
}

static void ORT_API_CALL release_allocator(OrtEpFactory *f, OrtAllocator *a) { (void)f, (void)a; }

static OrtStatus *ORT_API_CALL create_data_transfer(OrtEpFactory *f, OrtDataTransferImpl **out) {
  (void)f;
  *out = NULL;
  return NULL;
}

static bool ORT_API_CALL is_stream_aware(const OrtEpFactory *f) {
  (void)f;
  return false;
}

static OrtStatus *ORT_API_CALL create_sync_stream(OrtEpFactory *f, const OrtMemoryDevice *dev,
                                                  const OrtKeyValuePairs *options,
                                                  OrtSyncStreamImpl **out) {
  (void)f, (void)dev, (void)options;
  *out = NULL;
  return NULL;
}

OrtStatus *ep_factory_create(const char *registered_name, const OrtApiBase *api_base,
                             const OrtLogger *logger, OrtEpFactory **factories, size_t max,
                             size_t *count) {
  *count = 0;
  int version = EP_ORT_API_VERSION_SHAPES;
  const OrtApi *ort = api_base->GetApi(version);
  if (!ort) ort = api_base->GetApi(version = EP_ORT_API_VERSION);
  if (!ort) return NULL; /* an ORT older than 1.23: offer nothing rather than crash */
  if (max < 1)
    return ep_status(ort, ORT_INVALID_ARGUMENT, "%s: ORT allows no factory", EP_NAME);
  ep_factory *fac = calloc(1, sizeof *fac);
  if (!fac) return ep_status(ort, ORT_FAIL, "%s: out of memory", EP_NAME);
  fac->ort = ort;
  fac->ort_version = version;
  fac->ep_api = ort->GetEpApi();
  /* ORT 1.25+ lets an EP add events to its profiler (ep/profiler.h); older ones lack the calls */
  fac->profiling = api_base->GetApi(EP_ORT_API_VERSION_PROFILER) != NULL;
  fac->logger = logger;
  snprintf(fac->registered_name, sizeof fac->registered_name, "%s",
           registered_name && *registered_name ? registered_name : EP_NAME);
  OrtEpFactory *b = &fac->base;
  b->ort_version_supported = EP_ORT_API_VERSION;
  b->GetName = get_name;
  b->GetVendor = get_vendor;
  b->GetSupportedDevices = get_supported_devices;
  b->CreateEp = create_ep;
  b->ReleaseEp = release_ep;
  b->GetVendorId = get_vendor_id;
  b->GetVersion = get_version;
  b->ValidateCompiledModelCompatibilityInfo = validate_compat;
  b->CreateAllocator = create_allocator;
  b->ReleaseAllocator = release_allocator;
  b->CreateDataTransfer = create_data_transfer;
  b->IsStreamAware = is_stream_aware;
  b->CreateSyncStreamForDevice = create_sync_stream;
  factories[0] = b;
  *count = 1;
  return NULL;
}

void ep_factory_release(OrtEpFactory *factory) { free(factory); }
