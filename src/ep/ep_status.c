/* fbx_status <-> OrtStatus: the only conversion point (STYLE.md rule 3). */
#include "ep_internal.h"

fbx_ep_ort fbx__ep_ort;

OrtStatus *fbx_ep_status_to_ort(fbx_status *s) {
  if (!s) return NULL;
  OrtErrorCode code = ORT_FAIL;
  switch (fbx_status_code_of(s)) {
    case FBX_STATUS_INVALID_ARG: code = ORT_INVALID_ARGUMENT; break;
    case FBX_STATUS_NOT_IMPLEMENTED: code = ORT_NOT_IMPLEMENTED; break;
    case FBX_STATUS_NO_MEMORY: code = ORT_FAIL; break;
    default: code = ORT_FAIL; break;
  }
  OrtStatus *os = FBX_ORT ? FBX_ORT->CreateStatus(code, fbx_status_message(s)) : NULL;
  fbx_status_free(s);
  return os;
}

fbx_status *fbx_ep_status_from_ort(OrtStatus *os, const char *what) {
  if (!os) return NULL;
  const char *msg = FBX_ORT->GetErrorMessage(os);
  OrtErrorCode code = FBX_ORT->GetErrorCode(os);
  fbx_status *s = fbx_status_new(code == ORT_INVALID_ARGUMENT ? FBX_STATUS_INVALID_ARG : FBX_STATUS_FAIL,
                                 "%s%s%s", what ? what : "", what ? ": " : "", msg ? msg : "?");
  FBX_ORT->ReleaseStatus(os);
  return s;
}
