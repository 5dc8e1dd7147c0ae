#ifndef XHRPC_CSHIMS_H
#define XHRPC_CSHIMS_H

#include <curl/curl.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_gen.h>
/* mallopt (M_MMAP_THRESHOLD) for xhrpcd's main: Glibc's Swift module does not export it. */
#include <malloc.h>
/* getrandom for ObjectName's pool: not in Glibc's Swift module either. */
#include <sys/random.h>
#include <stdint.h>
#include <zlib.h>

/* Typed, non-variadic doors to C calls that Swift cannot make: curl's setopt/getinfo
 * family and yajl's config calls are variadic. Inside a wrapper curl's compile-time type
 * check is gone, so the Swift side must pick the wrapper that matches the option's type
 * (long, curl_off_t, pointer or string, or one of the callback types). No logic here. */

/* curl_easy_setopt, one per argument type. */
CURLcode xh_easy_setopt_long(CURL *h, CURLoption o, long v);
CURLcode xh_easy_setopt_off(CURL *h, CURLoption o, curl_off_t v);
CURLcode xh_easy_setopt_ptr(CURL *h, CURLoption o, void *v);
CURLcode xh_easy_setopt_str(CURL *h, CURLoption o, const char *v);
CURLcode xh_easy_setopt_slist(CURL *h, CURLoption o, struct curl_slist *v);
CURLcode xh_easy_setopt_share(CURL *h, CURLoption o, CURLSH *v);
/* The callback types curl_easy_setopt takes. */
CURLcode xh_easy_setopt_write_cb(CURL *h, CURLoption o, curl_write_callback cb);
CURLcode xh_easy_setopt_read_cb(CURL *h, CURLoption o, curl_read_callback cb);
CURLcode xh_easy_setopt_xferinfo_cb(CURL *h, CURLoption o, curl_xferinfo_callback cb);
CURLcode xh_easy_setopt_opensocket_cb(CURL *h, CURLoption o, curl_opensocket_callback cb);
CURLcode xh_easy_setopt_closesocket_cb(CURL *h, CURLoption o, curl_closesocket_callback cb);
CURLcode xh_easy_setopt_sockopt_cb(CURL *h, CURLoption o, curl_sockopt_callback cb);
CURLcode xh_easy_setopt_debug_cb(CURL *h, CURLoption o, curl_debug_callback cb);
/* CURLOPT_SEEKFUNCTION: lets libcurl rewind an upload body (redirects 307/308, auth
 * retries) instead of failing with CURLE_SEND_FAIL_REWIND. */
CURLcode xh_easy_setopt_seek_cb(CURL *h, CURLoption o, curl_seek_callback cb);
CURLcode xh_easy_setopt_prereq_cb(CURL *h, CURLoption o, curl_prereq_callback cb);

/* curl_easy_getinfo, one per result type. */
CURLcode xh_easy_getinfo_long(CURL *h, CURLINFO i, long *out);
CURLcode xh_easy_getinfo_off(CURL *h, CURLINFO i, curl_off_t *out);
CURLcode xh_easy_getinfo_double(CURL *h, CURLINFO i, double *out);
CURLcode xh_easy_getinfo_str(CURL *h, CURLINFO i, char **out);
CURLcode xh_easy_getinfo_ptr(CURL *h, CURLINFO i, void **out);
CURLcode xh_easy_getinfo_socket(CURL *h, CURLINFO i, curl_socket_t *out);
/* CURLINFO_COOKIELIST: a list the caller frees with curl_slist_free_all. */
CURLcode xh_easy_getinfo_slist(CURL *h, CURLINFO i, struct curl_slist **out);

/* curl_multi_setopt. */
CURLMcode xh_multi_setopt_long(CURLM *m, CURLMoption o, long v);
CURLMcode xh_multi_setopt_ptr(CURLM *m, CURLMoption o, void *v);
CURLMcode xh_multi_setopt_socket_cb(CURLM *m, CURLMoption o, curl_socket_callback cb);
CURLMcode xh_multi_setopt_timer_cb(CURLM *m, CURLMoption o, curl_multi_timer_callback cb);

/* curl_share_setopt. CURLSHOPT_SHARE and CURLSHOPT_UNSHARE read an `int` (a
 * curl_lock_data), not a long: they get a wrapper of their own. */
CURLSHcode xh_share_setopt_long(CURLSH *s, CURLSHoption o, long v);
CURLSHcode xh_share_setopt_ptr(CURLSH *s, CURLSHoption o, void *v);
CURLSHcode xh_share_setopt_lock_data(CURLSH *s, CURLSHoption o, curl_lock_data v);

/* yajl_config takes one int. */
int xh_yajl_config(yajl_handle h, yajl_option o, int v);

/* How many of `count` bytes, from the start, a JSON string carries as they are: the
 * length of the run before the first byte that needs an escape (the quote, the
 * backslash, U+0000-U+001F). A table loop in C: no per-call set-up (strcspn builds its
 * table on every call), NUL is an ordinary byte to escape, and an unoptimised debug
 * build still runs it fast, where a Swift byte loop goes through generic code. */
size_t xh_json_unescaped_run(const uint8_t *bytes, size_t count);

/* Writes `count` bytes as base64 (RFC 4648's alphabet, '=' padding, no line breaks) to
 * `out`, which has room for 4 * ((count + 2) / 3) bytes, and returns that length. In C
 * for the reason above: a response body goes through it byte by byte, in debug builds
 * too, and Foundation's encoder costs about 12 instructions a byte (Base64.c). */
size_t xh_base64_encode(const uint8_t *bytes, size_t count, uint8_t *out);

/* Reads base64 text strictly (RFC 4648 section 4): a multiple of four characters of the
 * standard alphabet, '=' only as the last one or two, no line breaks or spaces. Writes
 * the bytes to `out` (room for 3 * (count / 4)) and returns how many, or SIZE_MAX when
 * the text is not such base64. Foundation's decoder is lenient about padding ("eA==="
 * decodes, "eA" does not); this one refuses both. */
size_t xh_base64_decode(const uint8_t *text, size_t count, uint8_t *out);

/* libFuzzer's driver, from libclang_rt.fuzzer_no_main (linked by `make fuzz` only):
 * xhrpc-fuzz calls it from its own `main`, because SwiftPM links every executable with
 * an entry point of its own and libFuzzer's `main` cannot take that place. Declared
 * here since Swift cannot declare a C function; nothing else calls it. */
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

/* zlib's inflateInit2 is a macro (it passes the library's version and the stream's size
 * to inflateInit2_): Swift imports no function-like macro. */
int xh_inflate_init2(z_stream *s, int windowBits);

#endif
