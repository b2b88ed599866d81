/*
 * CUDA source of the fused LinearAttention scan (ssm_attention_cuda.c), compiled by MLX at run
 * time through the bridge's custom-kernel calls. Inputs, in order: q, k, v, past, decay, beta,
 * params (int32, enum la_param in ssm_attention.c); outputs: out, present. One template constant,
 * NPL = ceil(dk / 32) (1..16).
 */
#ifndef SSM_ATTENTION_CUDA_H
#define SSM_ATTENTION_CUDA_H

enum { LA_CUDA_N_IN = 7, LA_CUDA_N_OUT = 2 };

extern const char la_cuda_header[];
extern const char la_cuda_source[];
extern const char *const la_cuda_inputs[LA_CUDA_N_IN];
extern const char *const la_cuda_outputs[LA_CUDA_N_OUT];

#endif
