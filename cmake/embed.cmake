# pp_embed_files(OUTVAR output.c files...): generates a C file that defines,
# for each file, `const unsigned char pp_asset_<name>[]` and
# `const size_t pp_asset_<name>_len`, <name> being the file name with
# non-alphanumerics turned into '_'. Declarations: core/output/assets.h.
function(pp_embed_files outvar output)
  set(inputs ${ARGN})
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} "-DINPUTS=${inputs}"
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_run.cmake
    DEPENDS ${inputs} ${CMAKE_SOURCE_DIR}/cmake/embed_run.cmake
    COMMENT "Embedding web assets"
    VERBATIM)
  set(${outvar} ${output} PARENT_SCOPE)
endfunction()
