/* llmfleet-testext: compiled on the build node; the macros come from the build environment. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifdef LLMFLEET_TESTEXT_BREAK
#error "llmfleet-testext: LLMFLEET_TESTEXT_BREAK is set, this build fails on purpose"
#endif
#ifndef LLMFLEET_VIA_WRAPPER
#define LLMFLEET_VIA_WRAPPER 0
#endif

static PyObject *arch_list(PyObject *self, PyObject *args) { return PyUnicode_FromString(LLMFLEET_ARCH_LIST); }
static PyObject *max_jobs(PyObject *self, PyObject *args) { return PyUnicode_FromString(LLMFLEET_MAX_JOBS); }
static PyObject *via_wrapper(PyObject *self, PyObject *args) { return PyLong_FromLong(LLMFLEET_VIA_WRAPPER); }

static PyObject *dot(PyObject *self, PyObject *args)
{
    long n, i, s = 0;
    if (!PyArg_ParseTuple(args, "l", &n))
        return NULL;
    for (i = 1; i <= n; i++)
        s += i * i;
    return PyLong_FromLong(s);
}

static PyMethodDef methods[] = {
    {"arch_list", arch_list, METH_NOARGS, "TORCH_CUDA_ARCH_LIST at build time"},
    {"max_jobs", max_jobs, METH_NOARGS, "MAX_JOBS at build time"},
    {"via_wrapper", via_wrapper, METH_NOARGS, "1 when compiled through the PATH_PREPEND compiler wrapper"},
    {"dot", dot, METH_VARARGS, "sum of i*i for i in 1..n, in C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "llmfleet_testext", NULL, -1, methods};

PyMODINIT_FUNC PyInit_llmfleet_testext(void) { return PyModule_Create(&module); }
