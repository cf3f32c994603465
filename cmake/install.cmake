# cmake/install.cmake — `cmake --install`: libkiln.so.<major> and libkiln.a,
# include/kiln.h, the kiln command and its man page, and the two ways to find
# them: lib/cmake/kiln (kilnConfig.cmake: kiln::kiln, the shared library;
# kiln::kiln_static, when the CUDA toolkit is found) and lib/pkgconfig/kiln.pc
# (Libs.private lists what the static library needs).
include(CMakePackageConfigHelpers)
set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

install(TARGETS kiln_shared EXPORT kilnTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development)
install(TARGETS kiln EXPORT kilnStaticTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# the man page: the command's help, every command's (cmake/manpage.cmake)
add_custom_command(OUTPUT ${PROJECT_BINARY_DIR}/kiln.1
  COMMAND ${CMAKE_COMMAND} -DKILN=$<TARGET_FILE:kiln_cli> -DOUT=${PROJECT_BINARY_DIR}/kiln.1
          -P ${PROJECT_SOURCE_DIR}/cmake/manpage.cmake
  DEPENDS kiln_cli ${PROJECT_SOURCE_DIR}/cmake/manpage.cmake VERBATIM)
add_custom_target(kiln_man ALL DEPENDS ${PROJECT_BINARY_DIR}/kiln.1)
install(FILES ${PROJECT_BINARY_DIR}/kiln.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)

install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
install(EXPORT kilnStaticTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR})
# 0.x: a new minor version may change the API
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
        DESTINATION ${KILN_CMAKE_DIR})

# kiln.pc: the static library's dependencies by name, with the toolkit's
# library directory (the shared library finds them through its RUNPATH)
get_filename_component(KILN_XXHASH_LIBDIR ${XXHASH_LIBRARY} DIRECTORY)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
