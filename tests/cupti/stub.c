/* An empty shared library that stands for a PyTorch wheel's library in the observer's tests. */
int ag_test_stub(void);
int ag_test_stub(void)
{
    return 0;
}
