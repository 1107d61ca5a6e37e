/* Application identifier and metadata of a .NET process. */
#ifndef DOTNET_APPID_H
#define DOTNET_APPID_H

#include <stddef.h>
#include <stdint.h>

#include "polyprof/plugin.h"

/* "dotnet: app.dll (/srv/app/app.dll)" for `dotnet [exec] [opts] app.dll`,
 * "dotnet: App (/srv/app/App)" for an apphost executable; "" if neither. */
void dotnet_appid(const struct pp_host *host, uint32_t pid, char *out, size_t cap);

/* Writes a JSON string literal (quotes included) of s into out. */
void dotnet_json_string(const char *s, char *out, size_t cap);

#endif
