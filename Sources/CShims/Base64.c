#include "CShims.h"

#include <pthread.h>
#include <string.h>

static const uint8_t base64_alphabet[64] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The two characters of every 12-bit value: one table load per two output bytes. */
static uint8_t base64_pairs[4096][2];
static pthread_once_t base64_pairs_once = PTHREAD_ONCE_INIT;

static void base64_make_pairs(void) {
    for (int v = 0; v < 4096; v++) {
        base64_pairs[v][0] = base64_alphabet[v >> 6];
        base64_pairs[v][1] = base64_alphabet[v & 63];
    }
}

size_t xh_base64_encode(const uint8_t *bytes, size_t count, uint8_t *out) {
    pthread_once(&base64_pairs_once, base64_make_pairs);
    uint8_t *start = out;
    size_t i = 0;
    /* Six bytes (48 bits, four 12-bit pairs) per step, read as one big-endian word; the
     * word's last two bytes belong to the next step, so eight must be readable. */
    for (; i + 8 <= count; i += 6) {
        uint64_t w;
        memcpy(&w, bytes + i, 8);
        w = __builtin_bswap64(w);
        memcpy(out, base64_pairs[(w >> 52) & 0xFFF], 2);
        memcpy(out + 2, base64_pairs[(w >> 40) & 0xFFF], 2);
        memcpy(out + 4, base64_pairs[(w >> 28) & 0xFFF], 2);
        memcpy(out + 6, base64_pairs[(w >> 16) & 0xFFF], 2);
        out += 8;
    }
    for (; i + 3 <= count; i += 3) {
        uint32_t v = (uint32_t)bytes[i] << 16 | (uint32_t)bytes[i + 1] << 8 | bytes[i + 2];
        memcpy(out, base64_pairs[v >> 12], 2);
        memcpy(out + 2, base64_pairs[v & 0xFFF], 2);
        out += 4;
    }
    if (i < count) {
        uint32_t v = (uint32_t)bytes[i] << 16 | (i + 1 < count ? (uint32_t)bytes[i + 1] << 8 : 0);
        out[0] = base64_alphabet[v >> 18];
        out[1] = base64_alphabet[(v >> 12) & 63];
        out[2] = i + 1 < count ? base64_alphabet[(v >> 6) & 63] : '=';
        out[3] = '=';
        out += 4;
    }
    return (size_t)(out - start);
}

/* Each text byte's 6-bit value, 64 for '=' and 255 for a byte outside the alphabet. */
static uint8_t base64_values[256];
static pthread_once_t base64_values_once = PTHREAD_ONCE_INIT;

static void base64_make_values(void) {
    memset(base64_values, 255, sizeof base64_values);
    for (int v = 0; v < 64; v++) base64_values[base64_alphabet[v]] = (uint8_t)v;
    base64_values['='] = 64;
}

size_t xh_base64_decode(const uint8_t *text, size_t count, uint8_t *out) {
    pthread_once(&base64_values_once, base64_make_values);
    if (count % 4 != 0) return SIZE_MAX;
    uint8_t *start = out;
    for (size_t i = 0; i < count; i += 4) {
        uint8_t a = base64_values[text[i]], b = base64_values[text[i + 1]];
        uint8_t c = base64_values[text[i + 2]], d = base64_values[text[i + 3]];
        int last = i + 4 == count;
        /* '=' only in the last group, as its last one or two characters. */
        if (a > 63 || b > 63) return SIZE_MAX;
        if (c > 63 && !(last && c == 64 && d == 64)) return SIZE_MAX;
        if (d > 63 && !(last && d == 64)) return SIZE_MAX;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)(c & 63) << 6 | (d & 63);
        *out++ = (uint8_t)(v >> 16);
        if (c != 64) *out++ = (uint8_t)(v >> 8);
        if (d != 64) *out++ = (uint8_t)v;
    }
    return (size_t)(out - start);
}
