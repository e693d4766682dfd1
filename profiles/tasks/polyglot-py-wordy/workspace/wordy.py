def answer(question):
    pass
