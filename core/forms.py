from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.models import User


class FirstAccountForm(UserCreationForm):
    email = forms.EmailField(required=False)

    class Meta:
        model = User
        fields = ("username", "email")


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, initial="my token")
