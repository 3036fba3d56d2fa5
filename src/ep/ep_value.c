/* The element type and shape of an OrtValue tensor, read once for the two
 * places that need them: graph conversion (initializers, tensor attributes)
 * and Compute (the inputs ORT passes in). */
#include "ep_internal.h"

fbx_status *fbx_ep_value_type_shape(const OrtValue *v, int *onnx_type, int64_t dims[FBX_MAX_RANK], size_t *rank,
                                    const char *what) {
  OrtTensorTypeAndShapeInfo *info = NULL;
  FBX_ORT_TRY(FBX_ORT->GetTensorTypeAndShape(v, &info));
  ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  *rank = 0;
  OrtStatus *os = FBX_ORT->GetTensorElementType(info, &et);
  if (!os) os = FBX_ORT->GetDimensionsCount(info, rank);
  if (!os && *rank <= FBX_MAX_RANK) os = FBX_ORT->GetDimensions(info, dims, *rank);
  FBX_ORT->ReleaseTensorTypeAndShapeInfo(info);
  if (os) return fbx_ep_status_from_ort(os, what);
  *onnx_type = (int)et;
  return NULL;
}
