/*
 * The EP factory: names the EP, offers ORT's CPU device (and its GPU devices when MLX has a GPU
 * backend), and creates one EP per session.
 */
#ifndef FACTORY_H
#define FACTORY_H

#include "ep/ep_types.h"

OrtStatus *ep_factory_create(const char *registered_name, const OrtApiBase *api_base,
                             const OrtLogger *logger, OrtEpFactory **factories, size_t max,
                             size_t *count);
void ep_factory_release(OrtEpFactory *factory);

#endif
