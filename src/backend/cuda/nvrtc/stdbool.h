/* For NVRTC only (embedded, see CMakeLists.txt): the generated kernels are
 * C++, where bool, true and false are keywords; ir_ops.h includes this. */
#ifndef FBX_NVRTC_STDBOOL_H
#define FBX_NVRTC_STDBOOL_H
#endif
