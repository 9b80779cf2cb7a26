/* tls.h: TLS for listeners and exporters (OpenSSL). Placeholder contract: the TLS work fills
 * in the rest of this header and core/tls.c. */
#ifndef HS_TLS_H
#define HS_TLS_H

/* SIGHUP: every TLS context in the process re-reads its certificate, key and CA files; a
 * context whose new files do not load keeps the old ones (logged). Connections already open
 * keep the context they started with. */
void hs_tls_reload_all(void);

#endif
