# Turns a text file into a C string constant: cmake -DIN=file -DOUT=file.c -P embed.cmake
file(READ ${IN} hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE ${OUT} "/* generated from config/default.yaml */\n#include <stddef.h>\n"
  "const char hs_default_config[] = {${body} 0x00};\n"
  "const size_t hs_default_config_len = sizeof(hs_default_config) - 1;\n")
