/* The library's only two exported symbols (see exports.map). */
#include "ep_internal.h"

#define FBX_EXPORT __attribute__((visibility("default")))

FBX_EXPORT OrtStatus *CreateEpFactories(const char *registration_name, const OrtApiBase *ort_api_base,
                                        const OrtLogger *default_logger, OrtEpFactory **factories,
                                        size_t max_factories, size_t *num_factories);
FBX_EXPORT OrtStatus *ReleaseEpFactory(OrtEpFactory *factory);

OrtStatus *CreateEpFactories(const char *registration_name, const OrtApiBase *ort_api_base,
                             const OrtLogger *default_logger, OrtEpFactory **factories,
                             size_t max_factories, size_t *num_factories) {
  fbx_trace_init();
  if (num_factories) *num_factories = 0;
  if (!ort_api_base || !factories || !num_factories) return NULL;
  /* We are built against API version ORT_API_VERSION; a newer ORT serves it. */
  const OrtApi *api = ort_api_base->GetApi(ORT_API_VERSION);
  if (!api) return NULL; /* an ORT older than our headers: nothing we can report through */
  fbx__ep_ort.api = api;
  fbx__ep_ort.ep = api->GetEpApi();
  if (max_factories < 1)
    return api->CreateStatus(ORT_INVALID_ARGUMENT, "Fusebox: no room for the EP factory");
  fbx_ep_factory *f = NULL;
  fbx_status *s = fbx_ep_factory_create(registration_name, default_logger, &f);
  if (s) return fbx_ep_status_to_ort(s);
  factories[0] = &f->base;
  *num_factories = 1;
  return NULL;
}

OrtStatus *ReleaseEpFactory(OrtEpFactory *factory) {
  fbx_ep_factory_destroy((fbx_ep_factory *)factory);
  return NULL;
}
