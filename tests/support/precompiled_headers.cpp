// The executable that makes the test executables' precompiled header (tests/CMakeLists.txt);
// it runs nothing.
int main() { return 0; }
