#include "CShims.h"
#include <string.h>

/* Each function forwards one typed argument to a variadic C call (see CShims.h). */

CURLcode xh_easy_setopt_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
CURLcode xh_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
CURLcode xh_easy_setopt_ptr(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
CURLcode xh_easy_setopt_str(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
CURLcode xh_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v) { return curl_easy_setopt(h, o, v); }
CURLcode xh_easy_setopt_share(CURL *h, CURLoption o, CURLSH *v) { return curl_easy_setopt(h, o, v); }
CURLcode xh_easy_setopt_write_cb(CURL *h, CURLoption o, curl_write_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_read_cb(CURL *h, CURLoption o, curl_read_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_xferinfo_cb(CURL *h, CURLoption o, curl_xferinfo_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_opensocket_cb(CURL *h, CURLoption o, curl_opensocket_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_closesocket_cb(CURL *h, CURLoption o, curl_closesocket_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_sockopt_cb(CURL *h, CURLoption o, curl_sockopt_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_debug_cb(CURL *h, CURLoption o, curl_debug_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_seek_cb(CURL *h, CURLoption o, curl_seek_callback cb) { return curl_easy_setopt(h, o, cb); }
CURLcode xh_easy_setopt_prereq_cb(CURL *h, CURLoption o, curl_prereq_callback cb) { return curl_easy_setopt(h, o, cb); }

CURLcode xh_easy_getinfo_long(CURL *h, CURLINFO i, long *out) { return curl_easy_getinfo(h, i, out); }
CURLcode xh_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *out) { return curl_easy_getinfo(h, i, out); }
CURLcode xh_easy_getinfo_double(CURL *h, CURLINFO i, double *out) { return curl_easy_getinfo(h, i, out); }
CURLcode xh_easy_getinfo_str(CURL *h, CURLINFO i, char **out) { return curl_easy_getinfo(h, i, out); }
CURLcode xh_easy_getinfo_ptr(CURL *h, CURLINFO i, void **out) { return curl_easy_getinfo(h, i, out); }
CURLcode xh_easy_getinfo_socket(CURL *h, CURLINFO i, curl_socket_t *out) { return curl_easy_getinfo(h, i, out); }
CURLcode xh_easy_getinfo_slist(CURL *h, CURLINFO i, struct curl_slist **out) { return curl_easy_getinfo(h, i, out); }

CURLMcode xh_multi_setopt_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
CURLMcode xh_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v) { return curl_multi_setopt(m, o, v); }
CURLMcode xh_multi_setopt_socket_cb(CURLM *m, CURLMoption o, curl_socket_callback cb) { return curl_multi_setopt(m, o, cb); }
CURLMcode xh_multi_setopt_timer_cb(CURLM *m, CURLMoption o, curl_multi_timer_callback cb) { return curl_multi_setopt(m, o, cb); }

CURLSHcode xh_share_setopt_long(CURLSH *s, CURLSHoption o, long v) { return curl_share_setopt(s, o, v); }
CURLSHcode xh_share_setopt_ptr(CURLSH *s, CURLSHoption o, void *v) { return curl_share_setopt(s, o, v); }
CURLSHcode xh_share_setopt_lock_data(CURLSH *s, CURLSHoption o, curl_lock_data v) { return curl_share_setopt(s, o, v); }

int xh_yajl_config(yajl_handle h, yajl_option o, int v) { return yajl_config(h, o, v); }

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static const uint8_t json_escaped[256] = {
    [0x00 ... 0x1F] = 1, ['"'] = 1, ['\\'] = 1,
};

size_t xh_json_unescaped_run(const uint8_t *bytes, size_t count) {
    /* Eight bytes at a time while none of them needs an escape (a body's base64 runs
     * for megabytes without one): a byte is below 0x20, or equal to '"' or '\\', when
     * the word's "has a byte less than n" test is true for it. */
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    size_t i = 0;
#if defined(__SSE2__)
    /* Sixteen at a time first where SSE2 is there (every x86-64): a 1 KiB response body
     * written into `fetch`'s result takes a quarter of the instructions it took eight at a
     * time. A byte needs an escape when it equals '"' or '\\', or when it is at most 0x1F
     * (unsigned: max(b, 0x1F) == 0x1F). The loops below find where in the block. */
    const __m128i quote16 = _mm_set1_epi8('"'), backslash16 = _mm_set1_epi8('\\');
    const __m128i control16 = _mm_set1_epi8(0x1F);
    for (; i + 16 <= count; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(bytes + i));
        __m128i found = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote16), _mm_cmpeq_epi8(v, backslash16)),
                                     _mm_cmpeq_epi8(_mm_max_epu8(v, control16), control16));
        if (_mm_movemask_epi8(found)) break;
    }
#endif
    for (; i + 8 <= count; i += 8) {
        uint64_t w;
        memcpy(&w, bytes + i, 8);
        uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
        uint64_t found = ((w - ones * 0x20) | (quote - ones) | (backslash - ones)) & ~w & highs;
        if (found) break;
    }
    while (i < count && !json_escaped[bytes[i]]) i++;
    return i;
}

int xh_inflate_init2(z_stream *s, int windowBits) { return inflateInit2(s, windowBits); }
