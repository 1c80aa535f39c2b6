/* A few signal kernels written the way audio codecs write them: qualifiers through
   macros, a return type and statements split across #ifdef branches. */
#include "audio_defs.h"

static AUD_INLINE acc_t mac(acc_t s, sample_t a, sample_t b)
{
   return s + (acc_t)a * (acc_t)b;
}

void aud_gain(const sample_t * AUD_RESTRICT in, sample_t * AUD_RESTRICT out,
              float gain, int n)
{
   int i;
   for (i = 0; i < n; i++)
      out[i] = (sample_t)(gain * in[i]);
}

#ifdef FIXED_AUDIO
acc_t
#else
void
#endif
aud_xcorr(const sample_t * AUD_RESTRICT x, const sample_t * AUD_RESTRICT y,
          acc_t * AUD_RESTRICT xc, int len, int max_lag)
{
   int i, j;
#ifdef FIXED_AUDIO
   acc_t maxcorr = 1;
#endif
   for (i = 0; i < max_lag; i++)
   {
      acc_t s = 0;
#if defined(FIXED_AUDIO) && defined(AUDIO_CHECK)
      {
         acc_t check = 0;
#endif
         for (j = 0; j < len; j++)
            s = mac(s, x[j], y[i + j]);
#if defined(FIXED_AUDIO) && defined(AUDIO_CHECK)
      }
#endif
      xc[i] = s;
#ifdef FIXED_AUDIO
      maxcorr = s > maxcorr ? s : maxcorr;
#endif
   }
#ifdef FIXED_AUDIO
   return maxcorr;
#endif
}

void aud_energy(const sample_t * AUD_RESTRICT x, acc_t * AUD_RESTRICT e, int frames,
                int frame_len)
{
   int f, k;
   for (f = 0; f < frames; f++)
   {
      acc_t s = 0;
      for (k = 0; k < frame_len; k++)
         s = mac(s, x[f * frame_len + k], x[f * frame_len + k]
#ifdef FIXED_AUDIO
                 >> 1
#endif
                 );
      e[f] = s;
   }
}
