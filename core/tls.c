/* tls.c: TLS for listeners and exporters (OpenSSL). */
#include "tls.h"

void hs_tls_reload_all(void)
{
}
