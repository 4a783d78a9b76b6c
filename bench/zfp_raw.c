// SPDX-License-Identifier: BSD-3-Clause
/* zfp_raw -- Debian libzfp called the ordinary way (zfp_compress / zfp_decompress of one 1-D
 * array of 8 Mi floats, fixed rate 8, 16, 32, serial), to tell the library's own speed from
 * our codec's (docs/codecs/zfp.md, "Benchmark"). Usage: zfp_raw */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under strict C11 */
#include <zfp.h>
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(void){
  size_t n=8u<<20; float*x=malloc(n*4),*y=malloc(n*4);
  for(size_t i=0;i<n;i++) x[i]=sinf(i*1e-3f)+1e-3f*(float)(rand()%1000);
  for(int rate=8;rate<=32;rate*=2){
    zfp_field*f=zfp_field_1d(x,zfp_type_float,n); zfp_stream*z=zfp_stream_open(NULL);
    zfp_stream_set_rate(z,rate,zfp_type_float,1,0);
    size_t cap=zfp_stream_maximum_size(z,f); void*buf=malloc(cap);
    bitstream*s=stream_open(buf,cap); zfp_stream_set_bit_stream(z,s);
    double t0=now(); zfp_stream_rewind(z); size_t sz=zfp_compress(z,f); double t1=now();
    zfp_field*g=zfp_field_1d(y,zfp_type_float,n); zfp_stream_rewind(z); zfp_decompress(z,g); double t2=now();
    printf("zfp_compress 1-D float rate %d: %zu B, enc %.3f GB/s dec %.3f GB/s\n",rate,sz,n*4/(t1-t0)/1e9,n*4/(t2-t1)/1e9);
  }
  return 0;}
