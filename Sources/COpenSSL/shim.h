// OpenSSL, already on the machine under libcurl: TLS on the TCP listener (memory BIOs
// driven by the loop) and the hashing and constant-time comparison of principals' tokens.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

// SSL_OP_* are 64-bit expressions (SSL_OP_BIT(n)) that Swift does not import: the options
// the TLS listener sets, as constants.
static const uint64_t XHRPC_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t XHRPC_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static const uint64_t XHRPC_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
