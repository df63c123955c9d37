#pragma once
// Which sanitizer this file is compiled under: FERRY_ASAN (AddressSanitizer)
// and FERRY_TSAN (ThreadSanitizer) are defined to 1 when on. GCC defines
// __SANITIZE_ADDRESS__ and __SANITIZE_THREAD__; clang before 15 only answers
// __has_feature (make asan and make tsan build with clang).

#if defined(__SANITIZE_ADDRESS__)
#define FERRY_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FERRY_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define FERRY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FERRY_TSAN 1
#endif
#endif
