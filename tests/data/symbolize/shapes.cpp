// C++ fixture for the symbolizer tests (compiled with g++ -O2 -g into a tempdir):
// a namespace, a class template with an inlined method, and a function template with
// two instances, so names come out demangled and inline chains carry C++ names.
#include <cstdio>
#include <vector>

namespace shapes {

template <typename T> struct Accumulator {
    T value;
    __attribute__((always_inline)) inline void add(T x) { value = value / 2 + x; }
};

template <typename T> __attribute__((noinline)) T total(const std::vector<T> &items)
{
    Accumulator<T> acc{0};
    for (const T &x : items)
        acc.add(x);
    return acc.value;
}

} // namespace shapes

int main(int argc, char **)
{
    std::vector<int> ints(100, argc);
    std::vector<double> doubles(100, argc * 0.5);
    std::printf("%d %f\n", shapes::total(ints), shapes::total(doubles));
    return 0;
}
