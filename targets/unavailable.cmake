# Included by targets/el2 and targets/spmc (each also builds standalone).
# kconform_target_unavailable(DIR REQUIRED MESSAGE...): a target that needs code under
# test from a tree (targets/el2, targets/spmc) and cannot be built here: a configure
# error when REQUIRED (KCONFORM_<DIR>_REQUIRED=ON), else a warning that DIR is skipped.
# MESSAGE may be given in several strings (joined).
function(kconform_target_unavailable dir required)
  set(msg "")
  math(EXPR _last "${ARGC} - 1")
  foreach(_i RANGE 2 ${_last})  # ARGV<i>, not ARGN: a ';' in a message stays a ';'
    string(APPEND msg "${ARGV${_i}}")
  endforeach()
  if(required)
    message(FATAL_ERROR "${msg}")
  endif()
  string(TOUPPER "${dir}" _upper)
  message(WARNING "${msg}\ntargets/${dir} is skipped (set KCONFORM_${_upper}_REQUIRED=ON to make this an error).")
endfunction()
