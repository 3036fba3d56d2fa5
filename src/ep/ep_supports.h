/* The backend's supports() at GetCapability (ep_supports.c). No ORT here. */
#ifndef FBX_EP_SUPPORTS_H
#define FBX_EP_SUPPORTS_H

#include <stdbool.h>
#include <stddef.h>

#include "../backend/backend.h"
#include "../onnx/onnx_graph.h"

/* Whether be runs node ni of g, a node the registry found claimable: asks
 * be's supports() about each IR node it translates to. True when the backend
 * has no supports() (nothing is translated then) or the node does not
 * translate alone. On false, reason[0..cap) says "<device>: <why>". */
bool fbx_ep_backend_supports_node(fbx_backend *be, const fbx_onnx_graph *g, int ni, char *reason, size_t cap);

#endif
