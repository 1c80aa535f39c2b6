/* Portable keywords and the sample type of a small audio library. */
#ifndef AUDIO_DEFS_H
#define AUDIO_DEFS_H

#if !defined(__STDC_VERSION__) || (__STDC_VERSION__ < 199901L)
# if defined(__GNUC__)
#  define AUD_RESTRICT __restrict__
# else
#  define AUD_RESTRICT
# endif
#else
# define AUD_RESTRICT restrict
#endif

#if defined(__GNUC__)
# define AUD_INLINE __inline__ __attribute__((always_inline))
#else
# define AUD_INLINE inline
#endif

#ifdef FIXED_AUDIO
typedef short sample_t;
typedef int acc_t;
#else
typedef float sample_t;
typedef float acc_t;
#endif

#endif
