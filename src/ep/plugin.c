/*
 * The plugin's only exported symbols: ORT calls CreateEpFactories after loading the library and
 * ReleaseEpFactory before unloading it. Everything else is reached through the factory's table.
 */
#include "ep/factory.h"

#define EP_EXPORT __attribute__((visibility("default")))

EP_EXPORT OrtStatus *CreateEpFactories(const char *registered_name, const OrtApiBase *api_base,
                                       const OrtLogger *default_logger, OrtEpFactory **factories,
                                       size_t max_factories, size_t *num_factories) {
  return ep_factory_create(registered_name, api_base, default_logger, factories, max_factories,
                           num_factories);
}

EP_EXPORT OrtStatus *ReleaseEpFactory(OrtEpFactory *factory) {
  ep_factory_release(factory);
  return NULL;
}
