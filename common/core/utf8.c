/* common/core/utf8.c: UTF-8 classification and lossy repair (utf8.h). */
#include "core/utf8.h"

#include <string.h>

int utf8_step(const uint8_t *s, size_t n) {
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b < 0xC2) return -1;
    else if (b <= 0xDF) need = 1;
    else if (b == 0xE0) { need = 2; lo = 0xA0; }
    else if (b == 0xED) { need = 2; hi = 0x9F; }
    else if (b <= 0xEF) need = 2;
    else if (b == 0xF0) { need = 3; lo = 0x90; }
    else if (b <= 0xF3) need = 3;
    else if (b == 0xF4) { need = 3; hi = 0x8F; }
    else return -1;
    for (int k = 1; k <= need; k++) {
        if ((size_t)k >= n) return 0;
        uint8_t c = s[k];
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return -k;
    }
    return need + 1;
}

size_t utf8_repair(const char *in, size_t n, char *out) {
    const uint8_t *s = (const uint8_t *)in;
    char *o = out;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {           /* ASCII run */
            size_t j = i;
            while (j < n && s[j] < 0x80) j++;
            memcpy(o, in + i, j - i);
            o += j - i;
            i = j;
            continue;
        }
        int r = utf8_step(s + i, n - i);
        if (r > 0) {
            memcpy(o, in + i, (size_t)r);
            o += r;
            i += (size_t)r;
        } else {                     /* r == 0: a truncated sequence at the end, one U+FFFD for all of it */
            o[0] = (char)0xEF, o[1] = (char)0xBF, o[2] = (char)0xBD;
            o += 3;
            i += r < 0 ? (size_t)-r : n - i;
        }
    }
    return (size_t)(o - out);
}
